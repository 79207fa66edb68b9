// CudaEngine (model, weights, kernel choices; immutable once built) and CudaContext (memory, bindings, CUDA graphs).
#include "backends/cuda/cuda_engine.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/device.h"
#include "backends/cuda/instance.h"
#include "backends/cuda/kernels/conv.h"
#include "backends/cuda/kernels/eltwise_chain.h"
#include "backends/cuda/kernels/pdl_policy.h"
#include "core/file_io.h"
#include "plan/graph_codec.h"
#include "plan/plugin_list.h"
#include "plan/plan_file.h"
#include "plan/tactics.h"
#include "quant/qdq.h"
#include "runtime/backend.h"
#include "runtime/int8_sources.h"
#include "runtime/io_format.h"
#include "runtime/plan_sections.h"

namespace qd {

namespace {

Status check_cuda_options(const BuildOptions& opt) {
  if (opt.precision == Precision::kInt8 && opt.int8_mode != "exact" && opt.int8_mode != "bitexact") {
    return unsupported("--int8-mode " + opt.int8_mode + " is a CPU analysis mode; the GPU runs exact INT8");
  }
  return Status::ok();
}

// `model_path` names the model in messages.
Expected<std::unique_ptr<Engine>> build_cuda_engine(Graph g, const BuildOptions& opt, const std::string& model_path) {
  Int8Options int8;
  if (opt.precision == Precision::kInt8) {
    auto o = load_int8_options(g, opt);
    if (!o) return std::move(o).take_status().prefix(model_path);
    int8 = std::move(*o);
    if (!int8.act_zero_points.empty()) {
      return unsupported(asymmetric_summary(int8.act_zero_points) + "; the GPU's INT8 kernels are symmetric: run "
                         "this model with --device cpu --precision int8, or export it with symmetric quantizers")
          .prefix(model_path);
    }
  } else if (has_qdq(g)) {  // a QAT model built in float: its weights, dequantized; the Q/DQ pairs go
    auto s = strip_qdq(g);
    if (!s) {
      return std::move(s).take_status().prefix(model_path + " (a float CUDA plan takes the Q/DQ model's weights as "
                                               "qdeploy's INT8 reads them; `--device cpu` runs its "
                                               "QuantizeLinear/DequantizeLinear nodes as they are)");
    }
  }
  auto e = cuda::CudaEngine::create(std::move(g), opt, {}, std::move(int8));
  if (!e) return std::move(e).take_status().prefix(model_path);
  return std::unique_ptr<Engine>(std::move(*e));
}

// A CUDA plan holds what rebuilds the same engine without timing anything: the sections every plan has ("io",
// "layers"), the imported graph, the build options, and "cuda.kernels", the kernel chosen for each conv signature.
Expected<std::unique_ptr<Engine>> load_cuda_engine(const PlanFile& plan) {
  if (cuda::device_count() == 0) {
    return unsupported("this plan was built for a CUDA GPU (sm_" + std::to_string(plan.header.sm) +
                       ") and this machine has none; build a CPU plan with --device cpu");
  }
  const cuda::DeviceInfo d = QD_TRY(cuda::device_info(0));
  QD_RETURN_IF_ERROR(check_plan_target(plan.header, d.sm_major * 10 + d.sm_minor));
  CudaPlanParts parts = QD_TRY(decode_cuda_plan(plan));
  auto e = cuda::CudaEngine::create(std::move(parts.graph), parts.options, std::move(parts.kernels),
                                    std::move(parts.int8), /*frozen=*/true);
  if (!e) return e.status();
  return std::unique_ptr<Engine>(std::move(*e));
}

}  // namespace

const Backend& cuda_backend() {
  static const Backend kCuda{"cuda", &build_cuda_engine, &load_cuda_engine, &check_cuda_options};
  return kCuda;
}

namespace cuda {

Expected<std::unique_ptr<CudaEngine>> CudaEngine::create(Graph graph, const BuildOptions& opt,
                                                         std::map<std::string, std::string> kernel_choices,
                                                         Int8Options int8, bool frozen) {
  std::unique_ptr<CudaEngine> e(new CudaEngine(std::move(graph), opt));
  e->kernel_choice_ = std::move(kernel_choices);
  e->frozen_ = frozen;
  e->int8_ = std::move(int8);
  QD_RETURN_IF_ERROR(e->init());
  return e;
}

CudaEngine::~CudaEngine() = default;

Status CudaEngine::init() {
  if (device_count() == 0) {
    return unsupported("--device cuda: no CUDA device is visible (no GPU, or no driver); use --device cpu");
  }
  const DeviceInfo d = QD_TRY(device_info(opt_.device_index));
  QD_CUDA_TRY(cudaSetDevice(opt_.device_index));
  device_name_ = d.name;
  sm_ = d.sm_major * 10 + d.sm_minor;
  if (sm_ < 80) {
    return unsupported("the CUDA engine needs compute capability 8.0 or newer (cp.async, bf16/fp16 mma); " +
                       cuda::describe(d) + " is older");
  }
  QD_RETURN_IF_ERROR(cuda::conv_igemm_init());
  QD_RETURN_IF_ERROR(cuda::slice_concat_init());
  const auto& src = opt_.tactic_sources;
  if (!src.empty() && std::find(src.begin(), src.end(), "qdeploy") == src.end() && !cuda::cudnn_available()) {
    return unsupported("--tactic-sources cudnn: " + cuda::cudnn_unavailable_reason());
  }
  if (!frozen_) read_timing_cache(opt_.timing_cache, device_name_, opt_.kernel_policy.to_string(), &kernel_choice_);
  // Lowering once at the build shapes times the kernels and learns the outputs.
  inputs_ = QD_TRY(engine_inputs(graph_, opt_, &build_shapes_));
  // The bindings' formats (--input-format / --output-format); int8 ones take the tensors' INT8 scales (int8_ has
  // none unless this is an INT8 build). The outputs' are applied in lower(), once their types are inferred.
  QD_RETURN_IF_ERROR(apply_io_formats(opt_.input_formats, "input", int8_.act_scales, &inputs_));
  auto inst = instance(build_shapes_, true);
  if (!inst) return inst.status();
  // A shape profile's smallest and largest shapes are timed too; other shapes in the profile take the nearest timed
  // batch's kernels (lower.cpp) rather than timing at run time. Each timed batch's split (whole or two lanes) too,
  // once the outputs are known (contexts bind them).
  std::vector<std::map<std::string, Shape>> timed = {build_shapes_};
  for (const auto* bound : {&opt_.min_shapes, &opt_.max_shapes}) {
    std::map<std::string, Shape> shapes = build_shapes_;
    for (const auto& [name, s] : *bound) shapes[name] = s;
    if (std::find(timed.begin(), timed.end(), shapes) != timed.end()) continue;
    QD_RETURN_IF_ERROR(instance(shapes, true).status());
    timed.push_back(shapes);
  }
  for (const TensorDesc& o : (*inst)->outputs) {
    TensorDesc d = o;
    if (!d.shape.empty() && !inputs_.empty() && !inputs_[0].shape.empty() && inputs_[0].shape[0] < 0) d.shape[0] = -1;
    outputs_.push_back(d);
  }
  for (const auto& shapes : timed) QD_RETURN_IF_ERROR(split_choice(shapes, true).status());
  if (!frozen_) {
    QD_RETURN_IF_ERROR(
        write_timing_cache(opt_.timing_cache, device_name_, opt_.kernel_policy.to_string(), kernel_choice_));
  }
  built_ = true;
  return Status::ok();
}

void CudaEngine::keep_run_time_choices() const {
  if (!built_ || frozen_) return;  // init() writes the build's at its end; a loaded plan writes nothing
  const Status st = write_timing_cache(opt_.timing_cache, device_name_, opt_.kernel_policy.to_string(), kernel_choice_);
  if (!st.is_ok()) std::fprintf(stderr, "warning: kernels timed at run time not kept: %s\n", st.to_string().c_str());
}

Expected<std::shared_ptr<const Instance>> CudaEngine::instance(const std::map<std::string, Shape>& shapes,
                                                               bool tune) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = instances_.find(shapes);
  if (it != instances_.end()) return it->second;
  if (instances_.size() >= 16) instances_.clear();  // bounded: a few batch sizes are typical
  LowerInput in{&graph_, &opt_, shapes, &kernel_choice_, &weights_, &int8_, &int8_convs_, tune && !frozen_, frozen_,
                &inputs_};
  const size_t known = kernel_choice_.size();
  std::shared_ptr<Instance> inst = QD_TRY(lower(in));
  instances_[shapes] = inst;
  if (kernel_choice_.size() != known) keep_run_time_choices();
  return std::shared_ptr<const Instance>(inst);
}

namespace {

// The batch: the first input's first dim (0 for a scalar or no input).
int64_t batch_of(const std::map<std::string, Shape>& shapes) {
  return shapes.empty() || shapes.begin()->second.empty() ? 0 : shapes.begin()->second[0];
}

// The shapes of one of `parts` equal parts of the batch; empty where the batch does not divide so.
std::map<std::string, Shape> batch_part(const std::map<std::string, Shape>& shapes, int parts) {
  std::map<std::string, Shape> part = shapes;
  for (auto& [name, s] : part) {
    if (s.empty() || s[0] % parts != 0) return {};
    s[0] /= parts;
  }
  return part;
}

}  // namespace

Expected<std::string> CudaEngine::split_choice(const std::map<std::string, Shape>& shapes, bool tune) const {
  switch (opt_.kernel_policy.batch_split) {  // forced (A/B runs)
    case qdeploy::BatchSplit::kTimed: break;
    case qdeploy::BatchSplit::kWhole: return std::string(kSplitWhole);
    case qdeploy::BatchSplit::kLanes: return std::string(kSplitLanes);
    case qdeploy::BatchSplit::kLanesInStep: return std::string(kSplitLanesInStep);
  }
  const std::string key = batch_split_key(batch_of(shapes), shapes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = kernel_choice_.find(key); it != kernel_choice_.end()) {
      const std::string& v = it->second;
      if (split_words(v)) return v;  // one of kSplits
      return invalid("the plan or timing cache says '" + v + "' for " + key + " (known: " + kSplitWhole + ", " +
                     kSplitLanes + ", " + kSplitLanesInStep + "); rebuild the plan or delete the timing cache");
    }
  }
  // As for kernels: timed at build, and at run time only outside a shape profile and never by a loaded plan.
  if (frozen_ || (!tune && !opt_.max_shapes.empty())) return std::string(kSplitWhole);
  auto inst = QD_TRY(instance(shapes));
  std::string pick = kSplitWhole;
  const auto half = batch_part(shapes, 2);
  // The halves' kernels timed too (a plan keeps them); a model that cannot take the half batch stays whole.
  if (inst->split_refusal.empty() && batch_of(shapes) >= 2 && !half.empty() && instance(half, true)) {
    pick = QD_TRY(time_splits(shapes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  kernel_choice_[key] = pick;
  keep_run_time_choices();
  return pick;
}

// Times the batch whole and as two lanes (free, and held in step), each replayed as a CUDA graph on contexts of
// its own, in alternating rounds; lanes win only when at least 1% faster than the whole batch.
Expected<std::string> CudaEngine::time_splits(const std::map<std::string, Shape>& shapes) const {
  const std::vector<std::string> modes(std::begin(kSplits), std::end(kSplits));
  std::vector<std::unique_ptr<CudaContext>> ctx;
  for (const std::string& m : modes) {
    ctx.push_back(create_context());
    ctx.back()->forced_split_ = m;
    ctx.back()->use_cuda_graph(true);
    // Three contexts at once: where their memory does not fit, the batch runs whole.
    if (!ctx.back()->set_input_shapes(shapes).is_ok()) return std::string(kSplitWhole);
    if (m != kSplitWhole && ctx.back()->lanes_.empty()) return std::string(kSplitWhole);  // no valid parts
  }
  cudaStream_t s = nullptr;
  QD_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev[2];
  for (auto& e : ev) QD_CUDA_TRY(cudaEventCreate(&e));
  constexpr int kRounds = 5, kReplays = 8;
  std::vector<std::vector<float>> ms(modes.size());
  Status st;
  for (int r = 0; r < kRounds + 1 && st.is_ok(); ++r) {
    for (size_t m = 0; m < modes.size() && st.is_ok(); ++m) {
      st = cuda_status(cudaEventRecord(ev[0], s), "cudaEventRecord");
      for (int i = 0; i < kReplays && st.is_ok(); ++i) st = ctx[m]->enqueue(s);
      if (st.is_ok()) st = cuda_status(cudaEventRecord(ev[1], s), "cudaEventRecord");
      if (st.is_ok()) st = cuda_status(cudaEventSynchronize(ev[1]), "cudaEventSynchronize");
      float t = 0;
      if (st.is_ok() && r > 0) {  // round 0 captures the graphs and warms up
        cudaEventElapsedTime(&t, ev[0], ev[1]);
        ms[m].push_back(t);
      }
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaStreamDestroy(s);
  QD_RETURN_IF_ERROR(st);
  size_t best = 0;
  std::vector<float> med(modes.size());
  for (size_t m = 0; m < modes.size(); ++m) {
    std::sort(ms[m].begin(), ms[m].end());
    med[m] = ms[m][ms[m].size() / 2];
    if (med[m] < med[best]) best = m;
  }
  return best != 0 && med[best] < 0.99f * med[0] ? modes[best] : std::string(kSplitWhole);
}

std::string CudaEngine::describe() const {
  return "cuda (" + device_name_ + ", " + precision_name(opt_.precision) + ")";
}

std::unique_ptr<CudaContext> CudaEngine::create_context() const { return std::make_unique<CudaContext>(*this); }

std::map<std::string, Shape> CudaEngine::input_shapes(const std::map<std::string, Tensor>& inputs) const {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : inputs) {
    shapes[name] = t.shape();
    for (const TensorDesc& d : inputs_) {
      if (d.name == name) shapes[name] = logical_shape(t, d);
    }
  }
  return shapes;
}

Expected<std::vector<Tensor>> CudaEngine::run(const std::map<std::string, Tensor>& inputs) {
  std::lock_guard<std::mutex> lock(run_mu_);
  if (!default_ctx_) default_ctx_ = create_context();
  QD_RETURN_IF_ERROR(default_ctx_->set_input_shapes(input_shapes(inputs)));
  QD_RETURN_IF_ERROR(default_ctx_->upload(inputs, nullptr));
  QD_RETURN_IF_ERROR(default_ctx_->enqueue(nullptr));
  return default_ctx_->download(nullptr);
}

Status CudaEngine::save(const std::string& path) const {
  PlanFile plan = new_plan("cuda", opt_, inputs_, outputs_);
  plan.header.sm = static_cast<uint32_t>(sm_);
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  plan.header.cuda_runtime_version = static_cast<uint32_t>(rt);
  std::vector<PlanLayer> layers;
  for (const LayerInfo& l : QD_TRY(layer_info(build_shapes_))) {
    // `inspect` counts precisions by these words, so the kernel goes with the op.
    if (l.macs > 0) layers.push_back({l.name, l.kind + " " + l.kernel, static_cast<int64_t>(l.macs), l.precision});
  }
  plan.add("layers", encode_plan_layers(layers));
  plan.add("graph", QD_TRY(encode_graph(graph_)));
  if (std::string plugins = encode_plugin_list(graph_); !plugins.empty()) plan.add("plugins", std::move(plugins));
  plan.add("build_options", encode_build_options(opt_));
  if (opt_.precision == Precision::kInt8) plan.add("int8", encode_int8_options(resolve_float_nodes(graph_, int8_)));
  {
    std::lock_guard<std::mutex> lock(mu_);
    plan.add("cuda.kernels", nlohmann::json(kernel_choice_).dump(1));
    for (const auto& [sig, kernel] : kernel_choice_) {
      if (kernel.rfind("cudnn_", 0) == 0) plan.header.cudnn_version = cuda::cudnn_loaded_version();
    }
  }
  return write_plan(path, plan);
}

Expected<std::vector<LayerInfo>> CudaEngine::layer_info(const std::map<std::string, Shape>& shapes) const {
  auto inst = QD_TRY(instance(shapes));
  std::vector<LayerInfo> out;
  for (const auto& l : inst->layers) out.push_back(l->info);
  return out;
}

Expected<MemoryReport> CudaEngine::memory_report(const std::map<std::string, Shape>& shapes) const {
  auto inst = QD_TRY(instance(shapes));
  MemoryReport r;
  r.arena_bytes = inst->arena_bytes;
  r.activation_bytes = inst->activation_bytes;
  r.weight_bytes = inst->weight_bytes;
  for (const auto& c : inst->constants) r.weight_bytes += c->size();
  // A batch run as two lanes holds two half batches' activations instead (the whole batch's only once profiled).
  const auto half = batch_part(shapes, 2);
  if (inst->split_refusal.empty() && !half.empty() && QD_TRY(split_choice(shapes)) != kSplitWhole) {
    if (auto h = instance(half)) r.arena_bytes = 2 * (*h)->arena_bytes;
  }
  return r;
}

// ---- CudaContext ----

CudaContext::CudaContext(const CudaEngine& engine) : engine_(engine) {}

CudaContext::~CudaContext() {
  reset_graph();
  lanes_.clear();
  for (auto s : lane_streams_) cudaStreamDestroy(s);
  for (auto e : lane_events_) cudaEventDestroy(e);
  if (side_event_) cudaEventDestroy(side_event_);
  if (side_stream_) cudaStreamDestroy(side_stream_);
  if (arena_) cudaFree(arena_);
  for (auto& [name, p] : own_io_) cudaFree(p);
}

void CudaContext::reset_graph() {
  if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
  graph_exec_ = nullptr;
  graph_key_.clear();
}

Status CudaContext::set_input_shapes(const std::map<std::string, Shape>& shapes) {
  // A lane's half batch is the engine's own shape, checked by lowering it (it may lie outside the profile).
  if (!lane_) QD_RETURN_IF_ERROR(check_shapes(shapes));
  inst_ = QD_TRY(engine_.instance(shapes));
  out_descs_ = inst_->outputs;
  io_ptrs_.assign(inst_->slot_names.size(), nullptr);
  for (size_t s = 0; s < inst_->slot_names.size(); ++s) {
    const std::string& name = inst_->slot_names[s];
    if (auto b = bound_.find(name); b != bound_.end()) {
      io_ptrs_[s] = b->second;
      continue;
    }
    const size_t need = std::max<size_t>(inst_->slot_bytes(s), 1);
    if (own_io_bytes_[name] < need) {
      if (own_io_[name]) cudaFree(own_io_[name]);
      own_io_[name] = nullptr;
      QD_CUDA_TRY(cudaMalloc(&own_io_[name], need));
      own_io_bytes_[name] = need;
    }
    io_ptrs_[s] = own_io_[name];
  }
  const std::string split = forced_split_.empty() ? QD_TRY(engine_.split_choice(shapes)) : forced_split_;
  QD_RETURN_IF_ERROR(make_lanes(shapes, split));
  // With lanes, the whole batch's activations are needed only to run it layer by layer (profile, INT8 probes).
  return lanes_.empty() ? ensure_arena() : Status::ok();
}

Status CudaContext::check_shapes(const std::map<std::string, Shape>& shapes) const {
  for (const TensorDesc& d : engine_.inputs()) {
    auto it = shapes.find(d.name);
    if (it == shapes.end()) return invalid("missing input '" + d.name + "'");
    if (it->second.size() != d.shape.size()) {
      return invalid("input '" + d.name + "' has rank " + std::to_string(it->second.size()) + ", the model takes " +
                     shape_str(d.shape));
    }
    for (size_t i = 0; i < d.shape.size(); ++i) {
      if (d.shape[i] >= 0 && d.shape[i] != it->second[i]) {
        return invalid("input '" + d.name + "' has shape " + shape_str(it->second) + ", the model takes " +
                       shape_str(d.shape) + " (-1: any)" +
                       (d.layout == TensorLayout::kNHWC ? "; its binding is " + io_format_str(d) +
                                                              ": give its memory [N,H,W,C] or float32 [N,C,H,W]"
                                                        : ""));
      }
    }
  }
  if (shapes.size() != engine_.inputs().size()) return invalid("unknown input name among the given inputs");
  return check_in_profile(engine_.options(), shapes);
}

Status CudaContext::ensure_arena() {
  if (inst_->arena_bytes <= arena_bytes_) return Status::ok();
  if (arena_) cudaFree(arena_);
  arena_ = nullptr;
  arena_bytes_ = 0;
  QD_CUDA_TRY(cudaMalloc(&arena_, inst_->arena_bytes));
  arena_bytes_ = inst_->arena_bytes;
  return Status::ok();
}

Status CudaContext::make_lanes(const std::map<std::string, Shape>& shapes, const std::string& split) {
  lanes_.clear();
  reset_graph();
  const int parts = split == kSplitWhole ? 1 : 2;
  lane_slack_ = split == kSplitLanesInStep ? 2 : 0;
  if (parts < 2 || !inst_->split_refusal.empty()) return Status::ok();
  // The batch a multiple of the parts, and the part lowered (a model whose batch dim is fixed is not; the batch then
  // runs whole). The part need not be inside the plan's profile: it is the engine's own shape.
  const std::map<std::string, Shape> part_shapes = batch_part(shapes, parts);
  if (part_shapes.empty()) return Status::ok();
  auto lowered = engine_.instance(part_shapes);
  if (!lowered) return Status::ok();
  const std::shared_ptr<const Instance>& part = *lowered;
  // Every binding must be the batch's slice: the same slots, each of the same shape but its first dim.
  if (!part->split_refusal.empty() || part->slot_names != inst_->slot_names) return Status::ok();
  for (size_t s = 0; s < inst_->slot_names.size(); ++s) {
    Shape whole = part->tensors[part->slot_tensor[s]].shape;
    whole[0] *= parts;
    if (part->slot_bytes(s) * parts != inst_->slot_bytes(s) || whole != inst_->tensors[inst_->slot_tensor[s]].shape) {
      return Status::ok();
    }
  }
  while (lane_streams_.size() < static_cast<size_t>(parts)) {
    cudaStream_t st;
    QD_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    lane_streams_.push_back(st);
  }
  const size_t events = parts + 1 + parts * part->layers.size();
  while (lane_events_.size() < events) {
    cudaEvent_t ev;
    QD_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    lane_events_.push_back(ev);
  }
  for (int k = 0; k < parts; ++k) {
    auto lane = std::make_unique<CudaContext>(engine_);
    lane->forced_split_ = kSplitWhole;
    lane->lane_ = true;
    for (size_t s = 0; s < inst_->slot_names.size(); ++s) {
      QD_RETURN_IF_ERROR(lane->bind(inst_->slot_names[s], static_cast<char*>(io_ptrs_[s]) + k * part->slot_bytes(s)));
    }
    QD_RETURN_IF_ERROR(lane->set_input_shapes(part_shapes));
    lanes_.push_back(std::move(lane));
  }
  return Status::ok();
}

Status CudaContext::enqueue_lanes(cudaStream_t stream) {
  const int slack = lane_slack_;
  const size_t n = lanes_[0]->inst_->layers.size();
  const bool two = lanes_[0]->inst_->any_side();
  cudaEvent_t* const layer_events = lane_events_.data() + lanes_.size() + 1;  // [k * n + l]: lane k's layer l done
  QD_CUDA_TRY(cudaEventRecord(lane_events_[0], stream));
  for (size_t k = 0; k < lanes_.size(); ++k) {
    QD_CUDA_TRY(cudaStreamWaitEvent(lane_streams_[k], lane_events_[0], 0));
    QD_RETURN_IF_ERROR(lanes_[k]->begin_layers(two));
  }
  // Layer by layer, each lane's layer l after the other lanes' layer l - slack: the lanes stay in step, so that
  // one lane's blocks fill the SMs that the other's layer leaves idle (its last wave, a small layer).
  Status st;
  for (size_t l = 0; l < n && st.is_ok(); ++l) {
    for (size_t k = 0; k < lanes_.size() && st.is_ok(); ++k) {
      cudaEvent_t wait = nullptr;
      if (slack > 0 && l >= static_cast<size_t>(slack)) wait = layer_events[((k + 1) % lanes_.size()) * n + l - slack];
      st = lanes_[k]->enqueue_layer(l, lane_streams_[k], two, wait, slack > 0 ? layer_events[k * n + l] : nullptr);
    }
  }
  // Joined after an error too (a capture ends only once joined).
  for (size_t k = 0; k < lanes_.size(); ++k) {
    const Status joined = lanes_[k]->end_layers(lane_streams_[k]);
    if (st.is_ok()) st = joined;
    QD_CUDA_TRY(cudaEventRecord(lane_events_[k + 1], lane_streams_[k]));
    QD_CUDA_TRY(cudaStreamWaitEvent(stream, lane_events_[k + 1], 0));
  }
  return st;
}

Status CudaContext::bind(const std::string& name, void* device_ptr) {
  std::string names;
  bool known = false;
  for (const auto* list : {&engine_.inputs(), &engine_.outputs()}) {
    for (const TensorDesc& d : *list) {
      known = known || d.name == name;
      names += (names.empty() ? "" : ", ") + d.name;
    }
  }
  if (!known) return invalid("bind: the engine has no input or output '" + name + "' (it has: " + names + ")");
  bound_[name] = device_ptr;
  if (inst_) {
    for (size_t s = 0; s < inst_->slot_names.size(); ++s) {
      if (inst_->slot_names[s] != name) continue;
      io_ptrs_[s] = device_ptr;
      for (size_t k = 0; k < lanes_.size(); ++k) {
        QD_RETURN_IF_ERROR(lanes_[k]->bind(name, static_cast<char*>(device_ptr) + k * lanes_[k]->inst_->slot_bytes(s)));
      }
    }
  }
  return Status::ok();
}

void* CudaContext::device_buffer(const std::string& name) const {
  if (!inst_) return nullptr;
  for (size_t s = 0; s < inst_->slot_names.size(); ++s) {
    if (inst_->slot_names[s] == name) return io_ptrs_[s];
  }
  return nullptr;
}

Status CudaContext::upload(const std::map<std::string, Tensor>& inputs, cudaStream_t stream) {
  if (!inst_) return internal("CudaContext: set_input_shapes first");
  for (size_t s = 0; s < inst_->num_inputs; ++s) {
    auto it = inputs.find(inst_->slot_names[s]);
    if (it == inputs.end()) return invalid("missing input '" + inst_->slot_names[s] + "'");
    const TensorRef& r = inst_->tensors[inst_->slot_tensor[s]];
    const TensorDesc& d = engine_.inputs()[s];
    const Tensor* t = &it->second;
    const Shape memory = binding_shape(d, r.shape);
    Tensor converted;
    if (!is_binding_memory(*t, d) || t->shape() != memory) {
      if (is_binding_memory(*t, d) || t->dtype() != DType::kFloat32 || t->shape() != r.shape) {
        return invalid("input '" + d.name + "' must be " + dtype_name(r.dtype) + " [" + shape_str(memory) + "]" +
                       (IoFormat{d.dtype, d.layout}.is_default()
                            ? std::string()
                            : " (its binding, " + io_format_str(d) + ") or float32 [" + shape_str(r.shape) +
                                  "] (converted on the host)"));
      }
      converted = QD_TRY(to_binding_format(*t, d));
      t = &converted;
    }
    QD_CUDA_TRY(cudaMemcpyAsync(io_ptrs_[s], t->raw(), r.bytes, cudaMemcpyHostToDevice, stream));
    if (!converted.empty()) QD_CUDA_TRY(cudaStreamSynchronize(stream));  // before `converted` is freed
  }
  return Status::ok();
}

Expected<std::vector<Tensor>> CudaContext::download(cudaStream_t stream) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < inst_->outputs.size(); ++k) {
    const size_t s = inst_->num_inputs + k;
    const TensorRef& r = inst_->tensors[inst_->slot_tensor[s]];
    Tensor t = QD_TRY(Tensor::make(r.dtype, binding_shape(inst_->outputs[k], r.shape)));
    if (r.bytes) QD_CUDA_TRY(cudaMemcpyAsync(t.raw(), io_ptrs_[s], r.bytes, cudaMemcpyDeviceToHost, stream));
    out.push_back(std::move(t));
  }
  QD_CUDA_TRY(cudaStreamSynchronize(stream));
  return out;
}

Status CudaContext::begin_layers(bool two) {
  if (two && !side_stream_) {
    QD_CUDA_TRY(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
    QD_CUDA_TRY(cudaEventCreateWithFlags(&side_event_, cudaEventDisableTiming));
  }
  forked_ = false;
  return Status::ok();
}

Status CudaContext::enqueue_layer(size_t l, cudaStream_t stream, bool two, cudaEvent_t wait, cudaEvent_t done) {
  const Layer& L = *inst_->layers[l];
  // `to` waits for what was enqueued on `from` so far.
  auto order = [&](cudaStream_t from, cudaStream_t to) -> Status {
    QD_CUDA_TRY(cudaEventRecord(side_event_, from));
    QD_CUDA_TRY(cudaStreamWaitEvent(to, side_event_, 0));
    return Status::ok();
  };
  cudaStream_t s = stream;
  if (two) {
    s = L.side ? side_stream_ : stream;
    if (L.wait) QD_RETURN_IF_ERROR(order(L.side ? stream : side_stream_, s));
    forked_ = forked_ || L.side;
  }
  if (wait) QD_CUDA_TRY(cudaStreamWaitEvent(s, wait, 0));
  Pointers ptrs{static_cast<char*>(arena_), &io_ptrs_, &inst_->buffer_offsets};
  const bool ranges = !use_graph_;
  if (ranges) nvtxRangePushA(L.info.name.c_str());
  Status st = L.enqueue(*inst_, ptrs, s);
  if (ranges) nvtxRangePop();
  if (st.is_ok() && done) st = cuda_status(cudaEventRecord(done, s), "cudaEventRecord");
  return st.is_ok() ? st : st.prefix("layer '" + L.info.name + "'");
}

Status CudaContext::end_layers(cudaStream_t stream) {
  if (!forked_) return Status::ok();
  forked_ = false;
  QD_CUDA_TRY(cudaEventRecord(side_event_, side_stream_));
  QD_CUDA_TRY(cudaStreamWaitEvent(stream, side_event_, 0));
  return Status::ok();
}

Status CudaContext::enqueue_layers(cudaStream_t stream, std::vector<cudaEvent_t>* marks,
                                   const std::function<Status(size_t l)>& before_layer) {
  // Side-stream layers run beside the main chain in real runs; profiling and probing run every layer on the one
  // stream (the sequence is valid in order).
  const bool two = !marks && !before_layer && inst_->any_side();
  QD_RETURN_IF_ERROR(begin_layers(two));
  Status st;
  for (size_t l = 0; l < inst_->layers.size() && st.is_ok(); ++l) {
    if (before_layer) st = before_layer(l);
    if (st.is_ok() && marks) st = cuda_status(cudaEventRecord((*marks)[l], stream), "cudaEventRecord");
    if (st.is_ok()) st = enqueue_layer(l, stream, two, nullptr, nullptr);
  }
  // The side stream joins the main one at the end, after an error too (a capture ends only once joined).
  const Status joined = end_layers(stream);
  if (st.is_ok()) st = joined;
  if (st.is_ok() && marks) st = cuda_status(cudaEventRecord(marks->back(), stream), "cudaEventRecord");
  return st;
}

Status CudaContext::enqueue(cudaStream_t stream) {
  if (!inst_) return internal("CudaContext: set_input_shapes first");
  const PdlOff pdl(!engine_.options().kernel_policy.pdl);
  const auto run = [&](cudaStream_t s) { return lanes_.empty() ? enqueue_layers(s, nullptr) : enqueue_lanes(s); };
  if (!use_graph_) return run(stream);
  // The captured graph bakes in the instance, arena and I/O pointers: recapture when any of them changed.
  std::vector<void*> key = io_ptrs_;
  key.push_back(arena_);
  key.push_back(const_cast<Instance*>(inst_.get()));
  if (!graph_exec_ || key != graph_key_) {
    reset_graph();
    if (inst_->uses_cudnn) QD_RETURN_IF_ERROR(cuda::cudnn_thread_init());
    cudaStream_t cap = stream;
    cudaStream_t own = nullptr;
    if (!cap) {  // the legacy default stream cannot be captured: capture on a private one, then join
      QD_CUDA_TRY(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
      cap = own;
    }
    QD_CUDA_TRY(cudaStreamBeginCapture(cap, cudaStreamCaptureModeThreadLocal));
    Status st = run(cap);
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(cap, &graph);
    if (own) cudaStreamDestroy(own);
    QD_RETURN_IF_ERROR(st);
    QD_CUDA_TRY(e);
    e = cudaGraphInstantiate(&graph_exec_, graph, 0);
    cudaGraphDestroy(graph);
    QD_CUDA_TRY(e);
    graph_key_ = key;
  }
  QD_CUDA_TRY(cudaGraphLaunch(graph_exec_, stream));
  return Status::ok();
}

Expected<std::vector<LayerTime>> CudaContext::profile(int iterations, cudaStream_t stream) {
  if (!inst_) return internal("CudaContext: set_input_shapes first");
  const PdlOff pdl(!engine_.options().kernel_policy.pdl);
  QD_RETURN_IF_ERROR(ensure_arena());
  const size_t n = inst_->layers.size();
  std::vector<cudaEvent_t> marks(n + 1);
  for (auto& e : marks) QD_CUDA_TRY(cudaEventCreate(&e));
  std::vector<std::vector<float>> ms(n);
  Status st;
  for (int it = 0; it < iterations + 1 && st.is_ok(); ++it) {
    st = enqueue_layers(stream, &marks);
    if (!st.is_ok()) break;
    cudaEventSynchronize(marks.back());
    if (it == 0) continue;  // warm-up
    for (size_t l = 0; l < n; ++l) {
      float t = 0;
      cudaEventElapsedTime(&t, marks[l], marks[l + 1]);
      ms[l].push_back(t);
    }
  }
  for (auto& e : marks) cudaEventDestroy(e);
  QD_RETURN_IF_ERROR(st);
  std::vector<LayerTime> out;
  for (size_t l = 0; l < n; ++l) {
    const LayerInfo& i = inst_->layers[l]->info;
    std::sort(ms[l].begin(), ms[l].end());
    out.push_back({i, ms[l].empty() ? 0.0 : ms[l][ms[l].size() / 2]});
  }
  return out;
}

Expected<std::map<std::string, Tensor>> CudaEngine::read_int8_tensors(const std::map<std::string, Tensor>& inputs) {
  return create_context()->read_int8_tensors(inputs);
}

Expected<std::map<std::string, Tensor>> CudaContext::read_int8_tensors(const std::map<std::string, Tensor>& inputs) {
  const PdlOff pdl(!engine_.options().kernel_policy.pdl);
  const std::map<std::string, Shape> shapes = engine_.input_shapes(inputs);
  QD_RETURN_IF_ERROR(set_input_shapes(shapes));
  QD_RETURN_IF_ERROR(upload(inputs, nullptr));
  QD_RETURN_IF_ERROR(ensure_arena());
  QD_CUDA_TRY(cudaDeviceSynchronize());
  const Instance& inst = *inst_;
  Pointers ptrs{static_cast<char*>(arena_), &io_ptrs_, &inst.buffer_offsets};
  std::map<std::string, Tensor> out;
  auto grab = [&](size_t l) -> Status {
    for (const Instance::Int8Probe& p : inst.int8_probes) {
      if (p.first_reader != static_cast<int>(l)) continue;
      QD_CUDA_TRY(cudaDeviceSynchronize());
      const TensorRef& r = inst.tensors[p.tensor];
      // Pixels r.ld bytes apart (a slice of a wider buffer: more than r.bytes).
      std::vector<int8_t> raw(static_cast<size_t>(r.shape[0] * r.shape[2] * r.shape[3] * r.ld));
      QD_CUDA_TRY(cudaMemcpy(raw.data(), inst.ptr(p.tensor, ptrs), raw.size(), cudaMemcpyDeviceToHost));
      // r.shape is the stored NCHW view: [N, C, H, W], or [N, 4C, H/2, W/2] for a space-to-depth copy.
      const int64_t N = r.shape[0], C = r.shape[1] / (p.s2d ? 4 : 1), H = r.shape[2] * (p.s2d ? 2 : 1),
                    W = r.shape[3] * (p.s2d ? 2 : 1);
      Tensor t(DType::kInt8, {N, C, H, W});
      int8_t* d = t.data<int8_t>();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t y = 0; y < H; ++y)
            for (int64_t x = 0; x < W; ++x) {
              int64_t pix = (n * r.shape[2] + y) * r.shape[3] + x, ch = c;
              if (p.s2d) {
                pix = (n * r.shape[2] + y / 2) * r.shape[3] + x / 2;
                ch = ((y % 2) * 2 + x % 2) * C + c;
              }
              d[((n * C + c) * H + y) * W + x] = raw[static_cast<size_t>(pix * r.ld + r.coff + ch)];
            }
      out[p.value] = std::move(t);
    }
    return Status::ok();
  };
  QD_RETURN_IF_ERROR(enqueue_layers(nullptr, nullptr, grab));
  QD_CUDA_TRY(cudaDeviceSynchronize());
  return out;
}

}  // namespace cuda
}  // namespace qd
