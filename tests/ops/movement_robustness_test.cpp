// Untrusted-input robustness of the tensor and data-movement ops: random shapes, element types, index / shape /
// pad / scale inputs (negative, zero, huge, INT64_MIN) and attribute values must give a result or a Status (never
// kInternal), and never a crash or undefined behaviour (run under the sanitizer build to check the latter).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "ops/movement_test_util.h"

namespace qd {
namespace {

struct OpCase {
  const char* name;
  std::vector<const char*> int_attrs, ints_attrs, string_attrs;
};

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> c = {
      {"Reshape", {"allowzero"}, {}, {}},
      {"Flatten", {"axis"}, {}, {}},
      {"Squeeze", {}, {"axes"}, {}},
      {"Unsqueeze", {}, {"axes"}, {}},
      {"Transpose", {}, {"perm"}, {}},
      {"DepthToSpace", {"blocksize"}, {}, {"mode"}},
      {"SpaceToDepth", {"blocksize"}, {}, {}},
      {"Concat", {"axis"}, {}, {}},
      {"Split", {"axis"}, {"split"}, {}},
      {"Slice", {}, {"starts", "ends", "axes"}, {}},
      {"Gather", {"axis"}, {}, {}},
      {"GatherElements", {"axis"}, {}, {}},
      {"GatherND", {"batch_dims"}, {}, {}},
      {"Scatter", {"axis"}, {}, {}},
      {"ScatterElements", {"axis"}, {}, {"reduction"}},
      {"ScatterND", {}, {}, {"reduction"}},
      {"Expand", {}, {}, {}},
      {"Tile", {}, {}, {}},
      {"Pad", {}, {"pads"}, {"mode"}},
      {"Cast", {"to"}, {}, {}},
      {"CastLike", {}, {}, {}},
      {"ConstantOfShape", {}, {}, {}},
      {"EyeLike", {"k", "dtype"}, {}, {}},
      {"OneHot", {"axis"}, {}, {}},
      {"Range", {}, {}, {}},
      {"Resize", {"exclude_outside"}, {}, {"mode", "coordinate_transformation_mode", "nearest_mode"}},
      {"Upsample", {}, {}, {"mode"}},
      {"ArgMax", {"axis", "keepdims", "select_last_index"}, {}, {}},
      {"ArgMin", {"axis", "keepdims", "select_last_index"}, {}, {}},
      {"TopK", {"axis", "largest", "sorted", "k"}, {}, {}},
      {"CumSum", {"exclusive", "reverse"}, {}, {}},
      {"Trilu", {"upper"}, {}, {}},
      {"NonZero", {}, {}, {}},
      {"Compress", {"axis"}, {}, {}},
  };
  return c;
}

const char* kStrings[] = {"constant", "reflect", "edge", "wrap", "nearest", "linear", "cubic", "DCR", "CRD",
                          "half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize", "pytorch_half_pixel",
                          "tf_half_pixel_for_nn", "floor", "ceil", "round_prefer_ceil", "add", "mul", "max", "none", ""};

class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  int64_t any_int() {
    static const int64_t v[] = {-5, -3, -2, -1, -1, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 4, 7, 255, int64_t{1} << 20,
                                int64_t{1} << 40, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    return v[pick(sizeof v / sizeof v[0])];
  }
  float any_float() {
    static const float v[] = {0.f, 0.5f, 1.f, 1.f, 2.f, 2.f, 3.f, -1.f, 1e-30f, 1e30f, NAN, INFINITY};
    return v[pick(sizeof v / sizeof v[0])];
  }
  Shape shape(size_t max_rank = 4) {
    Shape s(pick(max_rank + 1));
    for (auto& d : s) d = static_cast<int64_t>(pick(5));
    return s;
  }
  Tensor data() {
    static const DType types[] = {DType::kFloat32, DType::kFloat32, DType::kInt8, DType::kUInt8, DType::kInt64,
                                  DType::kFloat64, DType::kBool, DType::kInt32, DType::kFloat16};
    const DType t = types[pick(sizeof types / sizeof types[0])];
    Tensor x(t, shape());
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, static_cast<double>(pick(7)) - 3);
    return x;
  }
  // A shape-like / index-like input: mostly small int64 vectors, sometimes scalars, floats or int32.
  Tensor control() {
    const size_t kind = pick(8);
    if (kind == 0) return Tensor::scalar_i64(any_int() % 6);
    if (kind == 1) {
      Tensor t(DType::kFloat32, {static_cast<int64_t>(pick(5))});
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = any_float();
      return t;
    }
    if (kind == 2) {
      Tensor t(DType::kInt32, shape(2));
      for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(any_int() % 9);
      return t;
    }
    if (kind == 3) {
      Tensor t(DType::kInt64, shape(3));
      for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = pick(6) ? static_cast<int64_t>(pick(4)) : any_int();
      return t;
    }
    if (kind == 4) {
      Tensor t(DType::kBool, {static_cast<int64_t>(pick(5))});
      for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(pick(2));
      return t;
    }
    std::vector<int64_t> v(pick(6));
    for (auto& e : v) e = pick(3) ? static_cast<int64_t>(pick(5)) - 1 : any_int();
    return Tensor::from_i64(v);
  }

 private:
  std::mt19937 rng_;
};

// Inference, then (when the outputs are of a testable size) the kernel: as the reference backend runs a node.
Status run_checked(OpType op, const AttrMap& a, const std::vector<Tensor>& inputs, int nout, int opset, bool* ran) {
  auto outs = test::run_op(op, a, inputs, nout, opset, int64_t{1} << 22);
  if (!outs) return outs.status();
  *ran = nout > 0 && !(*outs)[0].empty();
  return Status::ok();
}

TEST(MovementOpsRobustness, RandomInputsAndAttributesNeverCrash) {
  // QD_FUZZ_SEED picks another sequence (for longer local runs under the sanitizers).
  const char* seed_env = std::getenv("QD_FUZZ_SEED");
  Gen gen(seed_env ? static_cast<uint32_t>(std::strtoul(seed_env, nullptr, 10)) : 2024u);
  int ran = 0, errors = 0;
  for (const OpCase& oc : cases()) {
    const auto op = op_from_name(oc.name);
    ASSERT_TRUE(op) << oc.name;
    const OpSchema& schema = op_schema(*op);
    int op_ran = 0;
    for (int iter = 0; iter < 400; ++iter) {
      AttrMap a;
      for (const char* n : oc.int_attrs) {
        if (gen.pick(2)) a.set(n, gen.pick(3) ? gen.any_int() % 5 : gen.any_int());
      }
      for (const char* n : oc.ints_attrs) {
        if (gen.pick(3) == 0) continue;
        std::vector<int64_t> v(gen.pick(6));
        for (auto& e : v) e = gen.pick(4) ? static_cast<int64_t>(gen.pick(6)) - 2 : gen.any_int();
        a.set(n, v);
      }
      for (const char* n : oc.string_attrs) {
        if (gen.pick(3)) a.set(n, std::string(kStrings[gen.pick(sizeof kStrings / sizeof kStrings[0])]));
      }
      if (std::string(oc.name) == "Upsample" && gen.pick(2)) {
        std::vector<float> s(gen.pick(5));
        for (auto& e : s) e = gen.any_float();
        a.set("scales", s);
      }
      if (std::string(oc.name) == "ConstantOfShape" && gen.pick(2)) a.set("value", gen.data());
      if (gen.pick(12) == 0) a.set("axis", std::string("not an int"));  // wrong attribute type
      const int max_in = schema.max_inputs < 0 ? 4 : schema.max_inputs;
      const int nin = schema.min_inputs + static_cast<int>(gen.pick(static_cast<size_t>(max_in - schema.min_inputs + 1)));
      std::vector<Tensor> ins;
      const Tensor base = gen.data();
      for (int i = 0; i < nin; ++i) {
        const size_t kind = gen.pick(6);
        if (i == 0) ins.push_back(gen.pick(5) ? base : gen.control());
        else if (kind == 0) ins.push_back(base);
        else if (kind == 1) ins.push_back(gen.data());
        else if (kind == 2 && i >= schema.min_inputs) ins.push_back(Tensor());  // omitted optional input
        else ins.push_back(gen.control());
      }
      // Coherent inputs for ops whose kernels random ones rarely reach.
      if (std::string(oc.name) == "Slice" && gen.pick(2)) {
        const size_t len = gen.pick(base.rank() + 2);
        ins = {base};
        for (int k = 0; k < 4; ++k) {
          std::vector<int64_t> v(len);
          for (auto& e : v) e = gen.pick(4) ? static_cast<int64_t>(gen.pick(9)) - 4 : gen.any_int();
          if (k == 2) {
            for (size_t j = 0; j < len; ++j) v[j] = static_cast<int64_t>(j) - (gen.pick(2) ? 0 : static_cast<int64_t>(base.rank()));
          }
          ins.push_back(Tensor::from_i64(v));
        }
      }
      if (std::string(oc.name) == "ScatterND" && base.rank() >= 1 && gen.pick(2)) {
        const int64_t k = static_cast<int64_t>(gen.pick(3));
        Tensor idx(DType::kInt64, {k, 1});
        for (int64_t j = 0; j < k; ++j) idx.data<int64_t>()[j] = static_cast<int64_t>(gen.pick(7)) - 3;
        Shape us{k};
        us.insert(us.end(), base.shape().begin() + 1, base.shape().end());
        ins = {base, idx, Tensor(base.dtype(), us)};
      }
      const std::string name = oc.name;
      if ((name == "Scatter" || name == "ScatterElements") && gen.pick(2)) {
        Tensor idx(DType::kInt64, base.shape());
        const int64_t d0 = base.rank() ? base.shape()[0] : 1;
        for (int64_t j = 0; j < idx.numel(); ++j) idx.data<int64_t>()[j] = static_cast<int64_t>(gen.pick(2 * d0 + 2)) - d0 - 1;
        ins = {base, idx, base};
      }
      if (name == "Resize" && gen.pick(2)) {
        static const float s[] = {1.f, 2.f, 0.5f, 3.f, 0.75f};
        Tensor scales(DType::kFloat32, {static_cast<int64_t>(base.rank())});
        for (int64_t j = 0; j < scales.numel(); ++j) scales.data<float>()[j] = s[gen.pick(5)];
        ins = {base, Tensor(), scales};
      }
      if (name == "Range" && gen.pick(2)) {
        const DType t = gen.pick(2) ? DType::kInt64 : DType::kFloat32;
        ins.clear();
        for (int k = 0; k < 3; ++k) {
          Tensor v(t, {});
          v.set_f64(0, k == 2 && gen.pick(2) ? gen.any_float() : static_cast<double>(gen.pick(9)) - 4);
          ins.push_back(v);
        }
      }
      const int max_out = std::min(schema.max_outputs, 4);
      const int nout = schema.min_outputs + static_cast<int>(gen.pick(static_cast<size_t>(max_out - schema.min_outputs + 1)));
      for (int opset : {7, 9, 10, 11, 13, 17}) {
        bool did_run = false;
        const Status s = run_checked(*op, a, ins, nout, opset, &did_run);
        if (did_run && s.is_ok()) ++op_ran;
        if (!s.is_ok()) {
          ++errors;
          EXPECT_FALSE(s.message().empty()) << oc.name;
          EXPECT_NE(s.code(), StatusCode::kInternal) << oc.name << " opset " << opset << ": " << s.to_string();
        }
      }
    }
    ran += op_ran;
    EXPECT_GT(op_ran, 0) << oc.name << " never ran successfully: the generator does not reach its kernel";
  }
  EXPECT_GT(ran, 1000);
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace qd
