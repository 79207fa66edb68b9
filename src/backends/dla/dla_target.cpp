#include "backends/dla/dla_target.h"

#include <algorithm>

namespace qd {

namespace {

// Seed 004 (jetson_dla_tutorial, TensorRT 8.5 on JetPack 5.1): the build log of ModelBN and the Nsight trace of
// ModelGN, the observations the rules for pooling-by-reduction and normalization layers reproduce.
constexpr const char* kSeedLog = "seed 004 (jetson_dla_tutorial): TensorRT's layer placement log for ModelGN/ModelBN";
// Seed 001 (NVIDIA blog, YOLOv5 on Orin with cuDLA): what DLA 3.14 added for INT8 Sigmoid and SiLU.
constexpr const char* kSeedSilu = "seed 001 (YOLOv5 on Orin with cuDLA): DLA 3.14.0 INT8 SiLU fusion";

struct Rules {
  const DlaProfile& p;
  const Graph& g;
  const Node& n;

  std::string src(const char* section) const { return p.layer_doc + " > " + section; }
  const Value& in(size_t i) const { return g.values[n.inputs[i]]; }
  const Value& out(size_t i = 0) const { return g.values[n.outputs[i]]; }
  bool is_const(size_t i) const { return i < n.inputs.size() && n.inputs[i] >= 0 && g.is_constant(n.inputs[i]); }
  int64_t ai(const char* name, int64_t def) const {
    auto v = n.attrs.get_int(name, def);
    return v ? *v : def;
  }
  std::vector<int64_t> ais(const char* name, std::vector<int64_t> def) const {
    auto v = n.attrs.get_ints(name, def);
    return v ? *v : def;
  }
  std::string as(const char* name, const char* def) const {
    auto v = n.attrs.get_string(name, std::string(def));
    return v ? *v : def;
  }
};

bool in_range(const std::vector<int64_t>& v, int64_t lo, int64_t hi) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x >= lo && x <= hi; });
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// The explicit begin/end pads of a Conv or pooling node over its spatial dims, auto_pad resolved from the shapes.
std::vector<int64_t> spatial_pads(const Rules& r, const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                                  const std::vector<int64_t>& dil) {
  const size_t k = kernel.size();
  const std::string ap = r.as("auto_pad", "NOTSET");
  if (ap == "NOTSET") return r.ais("pads", std::vector<int64_t>(2 * k, 0));
  std::vector<int64_t> pads(2 * k, 0);
  if (ap == "VALID") return pads;
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = r.in(0).shape[2 + i], out = r.out().shape[2 + i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - in);
    pads[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    pads[i + k] = total - pads[i];
  }
  return pads;
}

Support conv_rules(const Rules& r) {
  const char* sec = "Convolution and Fully Connected layers";
  if (!r.is_const(1)) return Support::no("weights are not a constant", r.src(sec));
  const Shape& w = r.g.constant(r.n.inputs[1])->shape();
  if (w.size() != 4) return Support::no("only 2-D convolutions (4-D tensors) run on DLA", r.src(sec));
  const std::vector<int64_t> kernel = {w[2], w[3]};
  const auto strides = r.ais("strides", {1, 1});
  const auto dil = r.ais("dilations", {1, 1});
  const auto pads = spatial_pads(r, kernel, strides, dil);
  const int64_t group = r.ai("group", 1);
  if (!in_range(kernel, 1, 32)) return Support::no("kernel " + list(kernel) + " outside [1, 32]", r.src(sec));
  if (!in_range(strides, 1, 8)) return Support::no("stride " + list(strides) + " outside [1, 8]", r.src(sec));
  if (!in_range(dil, 1, 32)) return Support::no("dilation " + list(dil) + " outside [1, 32]", r.src(sec));
  if (!in_range(pads, 0, 31)) return Support::no("padding " + list(pads) + " outside [0, 31]", r.src(sec));
  for (size_t i = 0; i < pads.size(); ++i) {
    if (pads[i] >= kernel[i % 2]) {
      return Support::no("padding " + list(pads) + " not smaller than the kernel " + list(kernel), r.src(sec));
    }
  }
  if (w[0] < 1 || w[0] > 8192) return Support::no(std::to_string(w[0]) + " output channels outside [1, 8192]", r.src(sec));
  if (group < 1 || group > 8192) return Support::no("groups " + std::to_string(group) + " outside [1, 8192]", r.src(sec));
  return Support::ok({}, r.src(sec));
}

Support deconv_rules(const Rules& r) {
  const char* sec = "Deconvolution layer";
  if (!r.is_const(1)) return Support::no("weights are not a constant", r.src(sec));
  const Shape& w = r.g.constant(r.n.inputs[1])->shape();
  if (w.size() != 4) return Support::no("only 2-D deconvolutions (4-D tensors) run on DLA", r.src(sec));
  const std::vector<int64_t> kernel = {w[2], w[3]};
  const auto strides = r.ais("strides", {1, 1});
  if (!in_range(kernel, 1, 32)) return Support::no("kernel " + list(kernel) + " outside [1, 32]", r.src(sec));
  if (!in_range(strides, 1, 32)) return Support::no("stride " + list(strides) + " outside [1, 32]", r.src(sec));
  if (!in_range(r.ais("pads", {0, 0, 0, 0}), 0, 0) || !in_range(r.ais("output_padding", {0, 0}), 0, 0)) {
    return Support::no("padding must be 0", r.src(sec));
  }
  if (r.ai("group", 1) != 1) return Support::no("grouped deconvolution", r.src(sec));
  if (!in_range(r.ais("dilations", {1, 1}), 1, 1)) return Support::no("dilated deconvolution", r.src(sec));
  return Support::ok({}, r.src(sec));
}

Support pool_rules(const Rules& r) {
  const char* sec = "Pooling layer";
  if (r.in(0).shape.size() != 4) return Support::no("only 2-D pooling (4-D tensors) runs on DLA", r.src(sec));
  const auto kernel = r.ais("kernel_shape", {});
  const auto strides = r.ais("strides", std::vector<int64_t>(kernel.size(), 1));
  const auto dil = r.ais("dilations", std::vector<int64_t>(kernel.size(), 1));
  const auto pads = spatial_pads(r, kernel, strides, dil);
  if (!in_range(dil, 1, 1)) return Support::no("dilated pooling", r.src(sec));
  if (!in_range(kernel, 1, 8)) return Support::no("window " + list(kernel) + " outside [1, 8]", r.src(sec));
  if (!in_range(strides, 1, 16)) return Support::no("stride " + list(strides) + " outside [1, 16]", r.src(sec));
  if (!in_range(pads, 0, 7)) return Support::no("padding " + list(pads) + " outside [0, 7]", r.src(sec));
  return Support::ok({}, r.src(sec));
}

// Elementwise with two inputs: the output 4-D; a computed (non-constant) operand must have the output's shape, a
// constant one becomes a Scale or a broadcast ElementWise operand.
Support binary_rules(const Rules& r, const char* sec) {
  if (r.out().shape.size() != 4) return Support::no("only 4-D tensors (two spatial dims) run on DLA", r.src(sec));
  for (size_t i = 0; i < r.n.inputs.size(); ++i) {
    if (!r.is_const(i) && r.in(i).shape != r.out().shape) {
      return Support::no("input " + std::to_string(i) + " is broadcast (" + shape_str(r.in(i).shape) + " to " +
                             shape_str(r.out().shape) + "); this profile places broadcasting only of constants on DLA",
                         r.src(sec));
    }
  }
  return Support::ok({}, r.src(sec));
}

Support four_d(const Rules& r, const char* sec, const char* what) {
  if (r.in(0).shape.size() != 4 || r.out().shape.size() != 4) {
    return Support::no(std::string(what) + " on a " + std::to_string(r.in(0).shape.size()) +
                           "-D tensor: DLA runs 4-D tensors (two spatial dims) only",
                       r.src(sec));
  }
  return Support::ok({}, r.src(sec));
}

// Reshape, Flatten, Squeeze, Unsqueeze, Transpose: TensorRT's Shuffle layer.
Support shuffle_rules(const Rules& r) {
  const char* sec = "Shuffle layer";
  const Shape& a = r.in(0).shape;
  const Shape& b = r.out().shape;
  if (a.size() != 4 || b.size() != 4) {
    return Support::no("shuffle from " + std::to_string(a.size()) + "-D to " + std::to_string(b.size()) +
                           "-D: DLA's Shuffle takes and gives 4-D tensors only",
                       r.src(sec));
  }
  if (a[0] != b[0]) return Support::no("reshape across the batch dim", r.src(sec));
  if (r.n.op == OpType::Transpose && r.ais("perm", {0, 1, 2, 3})[0] != 0) {
    return Support::no("transpose moves the batch dim", r.src(sec));
  }
  return Support::ok({}, r.src(sec));
}

Support resize_rules(const Rules& r) {
  const char* sec = "Resize layer";
  const Shape& a = r.in(0).shape;
  const Shape& b = r.out().shape;
  if (a.size() != 4 || b.size() != 4) return Support::no("only 4-D resizing runs on DLA", r.src(sec));
  if (a[0] != b[0] || a[1] != b[1]) return Support::no("resizing along N or C", r.src(sec));
  const std::string mode = r.as("mode", "nearest");
  if (mode != "nearest") {
    return Support::no("mode '" + mode + "': this profile places only nearest-neighbour resizing on DLA", r.src(sec));
  }
  for (int d = 2; d < 4; ++d) {
    if (a[d] <= 0 || b[d] % a[d] != 0 || b[d] / a[d] < 1 || b[d] / a[d] > 32) {
      return Support::no("scale " + std::to_string(b[d]) + "/" + std::to_string(a[d]) +
                             " is not an integer in [1, 32]",
                         r.src(sec));
    }
  }
  return Support::ok({}, r.src(sec));
}

}  // namespace

bool is_silu_mul(const Graph& g, const Node& n) {
  if (n.op != OpType::Mul || n.inputs.size() != 2) return false;
  for (int k = 0; k < 2; ++k) {
    const int s = n.inputs[k], x = n.inputs[1 - k];
    if (s < 0 || x < 0) continue;
    const int p = g.values[s].producer;
    if (p >= 0 && g.nodes[p].op == OpType::Sigmoid && g.nodes[p].inputs[0] == x) return true;
  }
  return false;
}

Expected<DlaProfile> dla_profile(const std::string& version) {
  DlaProfile p;
  if (version == "8.6") {
    p.version = "8.6";
    p.tensorrt = "TensorRT 8.6";
    p.dla = "DLA 3.14 (JetPack 6.0, DRIVE OS 6.0.8)";
    p.layer_doc = "TensorRT 8.6 Developer Guide, 'DLA Supported Layers and Restrictions'";
    return p;
  }
  if (version == "10" || version.empty()) {
    p.version = "10";
    p.tensorrt = "TensorRT 10.0-10.7";
    p.dla = "DLA 3.14+ (JetPack 6.1, 6.2)";
    p.layer_doc = "TensorRT 10.x documentation, Working with DLA, 'DLA Supported Layers and Restrictions'";
    return p;
  }
  return invalid("unknown DLA profile '" + version + "'; covered: dla:8.6 (TensorRT 8.6, DLA 3.14) and dla:10 "
                 "(TensorRT 10.0-10.7; TensorRT 11.0-11.3 have no DLA)");
}

std::vector<std::string> dla_profile_versions() { return {"8.6", "10"}; }

Support DlaTarget::supports(const Graph& g, const Node& n, const NodeFormats& formats) const {
  const Rules r{p_, g, n};
  const char* general = "General Restrictions";
  for (TensorPrecision f : formats.inputs) {
    if (f == TensorPrecision::kFp32) return Support::no("DLA computes in FP16 and INT8 only (an fp32 input)", r.src(general));
  }
  for (TensorPrecision f : formats.outputs) {
    if (f == TensorPrecision::kFp32) return Support::no("DLA computes in FP16 and INT8 only (an fp32 output)", r.src(general));
  }
  // Static shapes within the DLA's dimension limits, for every data tensor.
  auto check_shape = [&](int v) -> Support {
    const Value& val = g.values[v];
    if (!val.has_shape) return Support::no("tensor '" + val.name + "' has no static shape (pass --shapes)", r.src(general));
    int64_t batch = 1;
    for (size_t d = 0; d < val.shape.size(); ++d) {
      if (val.shape[d] < 0) return Support::no("tensor '" + val.name + "' has a dynamic dim (pass --shapes)", r.src(general));
      if (d + 3 < val.shape.size()) {
        batch *= val.shape[d];
      } else if (val.shape[d] > p_.max_dim) {
        return Support::no("tensor '" + val.name + "' has a dim of " + std::to_string(val.shape[d]) + " (> " +
                               std::to_string(p_.max_dim) + ")", r.src(general));
      }
    }
    if (batch > p_.max_batch) {
      return Support::no("batch " + std::to_string(batch) + " of '" + val.name + "' exceeds " +
                             std::to_string(p_.max_batch), r.src(general));
    }
    return Support::ok();
  };
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] < 0 || g.is_constant(n.inputs[i])) continue;
    if (Support s = check_shape(n.inputs[i]); !s.yes) return s;
  }
  for (int o : n.outputs) {
    if (o < 0) continue;
    if (Support s = check_shape(o); !s.yes) return s;
  }
  const bool int8_in = !formats.inputs.empty() && formats.inputs[0] == TensorPrecision::kInt8;

  switch (n.op) {
    case OpType::Conv: return conv_rules(r);
    case OpType::ConvTranspose: return deconv_rules(r);
    case OpType::Gemm: {
      const char* sec = "Convolution and Fully Connected layers";
      if (!r.is_const(1)) return Support::no("B is not a constant: a matrix product, not a fully connected layer", r.src(sec));
      if (r.ai("transA", 0) != 0) return Support::no("transA", r.src(sec));
      if (r.in(0).shape.size() != 2) return Support::no("Gemm on a " + std::to_string(r.in(0).shape.size()) + "-D input", r.src(sec));
      const int64_t outs = r.out().shape[1];
      if (outs < 1 || outs > 8192) return Support::no(std::to_string(outs) + " outputs outside [1, 8192]", r.src(sec));
      return Support::ok("fully connected layer on a 4-D reshape of its input; TensorRT runs the reshapes around it "
                         "on the GPU (seed 004's ModelBN log: SHUFFLE reshape_after_/linear/Gemm on the GPU)",
                         r.src(sec));
    }
    case OpType::Relu:
    case OpType::Tanh:
    case OpType::LeakyRelu:
      return four_d(r, "Activation layer", "activation");
    case OpType::Clip: {
      if (!(n.inputs.size() < 2 || n.inputs[1] < 0 || r.is_const(1)) || !(n.inputs.size() < 3 || n.inputs[2] < 0 || r.is_const(2))) {
        return Support::no("Clip bounds are not constants", r.src("Activation layer"));
      }
      Support s = four_d(r, "Activation layer", "Clip");
      if (s.yes) s.reason = "as a clipped ReLU activation";
      return s;
    }
    case OpType::Sigmoid: {
      Support s = four_d(r, "Activation layer", "Sigmoid");
      if (!s.yes) return s;
      if (p_.silu_fusion) {
        for (const Node& m : g.nodes) {
          if (is_silu_mul(g, m) && std::find(m.inputs.begin(), m.inputs.end(), n.outputs[0]) != m.inputs.end()) {
            return Support::ok("SiLU with the following Mul: one DLA operation, fused into the Conv before it",
                               kSeedSilu);
          }
        }
      }
      return s;
    }
    case OpType::PRelu: {
      const char* sec = "Parametric ReLU layer";
      if (!r.is_const(1)) return Support::no("the slope is not a build-time constant", r.src(sec));
      return four_d(r, sec, "PRelu");
    }
    case OpType::Mul:
      if (is_silu_mul(g, n) && p_.silu_fusion) {
        Support s = binary_rules(r, "ElementWise layer");
        if (s.yes) s = Support::ok("the Mul of a SiLU (fused with its Sigmoid)", kSeedSilu);
        return s;
      }
      [[fallthrough]];
    case OpType::Add:
    case OpType::Sub:
    case OpType::Div:
    case OpType::Max:
    case OpType::Min:
    case OpType::Pow:
      return binary_rules(r, "ElementWise layer");
    case OpType::Equal:
    case OpType::Greater:
    case OpType::Less: {
      const char* sec = "Comparison operations";
      if (!int8_in) return Support::no("comparisons run on DLA in INT8 only", r.src(sec));
      return binary_rules(r, sec);
    }
    case OpType::BatchNormalization: {
      Support s = four_d(r, "Scale layer", "BatchNormalization");
      if (s.yes) s.reason = "as a Scale layer (folded into the Conv before it where there is one)";
      return s;
    }
    case OpType::LRN: {
      const char* sec = "LRN (Local Response Normalization) layer";
      const int64_t size = r.ai("size", 0);
      if (size != 3 && size != 5 && size != 7 && size != 9) {
        return Support::no("window " + std::to_string(size) + " not 3, 5, 7 or 9", r.src(sec));
      }
      Support s = four_d(r, sec, "LRN");
      if (s.yes && int8_in) s.reason = "INT8 runs as FP16 on DLA";
      return s;
    }
    case OpType::MaxPool:
    case OpType::AveragePool:
      return pool_rules(r);
    case OpType::GlobalAveragePool:
    case OpType::GlobalMaxPool:
    case OpType::ReduceMean:
    case OpType::ReduceSum:
    case OpType::ReduceMax:
    case OpType::ReduceMin:
    case OpType::ReduceProd:
      return Support::no("TensorRT's ONNX parser imports it as a Reduce layer, which this profile places on the GPU "
                         "(ModelBN's GlobalAveragePool runs on the GPU in the seed's log)",
                         kSeedLog);
    case OpType::InstanceNormalization:
    case OpType::GroupNormalization:
    case OpType::LayerNormalization:
    case OpType::MeanVarianceNormalization:
      return Support::no("a normalization layer: DLA has none (only BatchNorm, as Scale); every one splits the DLA "
                         "graph (ModelGN's GroupNorm in the seed)",
                         std::string(kSeedLog) + "; " + r.src("Layer Support and Restrictions"));
    case OpType::Concat: {
      const char* sec = "Concatenation layer";
      const int64_t rank = static_cast<int64_t>(r.out().shape.size());
      int64_t axis = r.ai("axis", 1);
      if (axis < 0) axis += rank;
      if (rank != 4) return Support::no("only 4-D concatenation runs on DLA", r.src(sec));
      if (axis != 1) return Support::no("concatenation along axis " + std::to_string(axis) + ": DLA concatenates along channels only", r.src(sec));
      int data_inputs = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) data_inputs += n.inputs[i] >= 0;
      if (data_inputs < 2) return Support::no("fewer than 2 inputs", r.src(sec));
      return Support::ok({}, r.src(sec));
    }
    case OpType::Resize:
    case OpType::Upsample:
      return resize_rules(r);
    case OpType::Reshape:
    case OpType::Flatten:
    case OpType::Squeeze:
    case OpType::Unsqueeze:
    case OpType::Transpose:
      return shuffle_rules(r);
    case OpType::Slice: {
      const char* sec = "Slice layer";
      Support s = four_d(r, sec, "Slice");
      if (!s.yes) return s;
      for (size_t i = 1; i < n.inputs.size(); ++i) {
        if (n.inputs[i] >= 0 && !r.is_const(i)) return Support::no("dynamic slicing (non-constant bounds)", r.src(sec));
      }
      if (r.in(0).shape[0] != r.out().shape[0]) return Support::no("slicing the batch dim", r.src(sec));
      return s;
    }
    case OpType::Softmax: {
      const char* sec = "SoftMax layer";
      Support s = four_d(r, sec, "Softmax");
      if (!s.yes) return s;
      int64_t axis = r.ai("axis", -1);
      if (axis < 0) axis += 4;
      if (axis == 0) return Support::no("softmax over the batch dim", r.src(sec));
      return s;
    }
    case OpType::Abs: return four_d(r, "Unary layer", "Abs");
    case OpType::Identity:
    case OpType::Dropout:
      return Support::ok("removed by TensorRT", r.src(general));
    default:
      return Support::no(std::string(op_name(n.op)) + " is not a DLA layer", r.src("Layer Support and Restrictions"));
  }
}

}  // namespace qd
