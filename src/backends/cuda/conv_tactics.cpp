// The conv layers' kernel choice: candidates (qdeploy's tile configurations, split-K, cuDNN's algorithms), their
// timing on scratch memory, and the in-network check of near ties; plan/tactics.h decides which to time and keeps
// the choices.
#include <algorithm>
#include <cstdio>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/kernels/pdl_policy.h"
#include "backends/cuda/lowerer.h"

namespace qd::cuda {

// A signature is "<kind>:n<N>:<the rest>"; the batch sits alone in the second field (see nearest_batch_choice).
std::string Lowerer::signature(const ConvParams& p, int res, bool int8) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s:n%d:h%dw%dc%d:k%d:r%ds%d:st%dx%d:p%dx%d:d%dx%d:o%d:res%d",
                int8 ? "conv_i8" : "conv_f16", p.N, p.H, p.W, p.C, p.K, p.R, p.S, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w,
                static_cast<int>(p.out_format), res);
  if (p.in_format != InFormat::kNhwc) {  // a stem reading the image: its layout and dtype
    return std::string(buf) + ":image" + (p.in_nchw ? "_nchw" : "_nhwc") + std::to_string(p.in_channels) +
           (p.in_format == InFormat::kImageF16 ? "_f16" : p.in_format == InFormat::kImageF32 ? "_f32" : "_i8");
  }
  return buf;
}

// A layer's key among the kernel choices: its shape, output and residual, and a second output (ConvArgs::y2), which
// the register epilogues write with code of their own: YOLOv5s' /model.6/cv3 (a second int8 output into /model.12's
// concatenation at its scale) took the TMA kernel timed for /model.6/cv1 of the same shape, which quantizes the
// second output by exact division, several times slower than cv1. Plans written before the second output was part
// of the key find their choice under the key without it (legacy_signature).
std::string Lowerer::signature(const ConvLayer& c) {
  const std::string s = legacy_signature(c);
  return c.out2 < 0 ? s : s + (c.p.out2_format == Out2Format::kI8 ? ":y2i8" : ":y2f16");
}

std::string Lowerer::candidate_name(const Candidate& c) {
  if (c.algo >= 0) return "cudnn_" + CudnnConv::algorithm_name(c.algo);
  if (c.splits == 1) return conv_igemm_config_name(c.config);
  return conv_igemm_config_name(c.config) + (c.cluster ? "/cluster" : "/splitk") + std::to_string(c.splits);
}

bool Lowerer::uses_source(const char* source) const {
  const auto& v = in_.opt->tactic_sources;
  return v.empty() || std::find(v.begin(), v.end(), source) != v.end();
}

// The layer's parameters as launched, with the input's real pixel stride (a Concat's channel slice is wider than
// its channels): what cuDNN and the special-purpose configurations (conv_igemm_config_fits) need to know.
ConvParams Lowerer::launch_params(const ConvLayer& c) const {
  ConvParams q = c.p;
  q.in_ld = inst_->tensors[c.in].ld;
  return q;
}

// INT8 layers take the INT8 configurations; their split-K partial sums are int32, so the result stays exact.
// cuDNN's algorithms compute fp16 layers only.
std::vector<Lowerer::Candidate> Lowerer::candidates(const ConvLayer& c) const {
  std::vector<Candidate> out;
  if (!c.int8 && c.p.in_format == InFormat::kNhwc && uses_source("cudnn")) {
    for (int algo : CudnnConv::algorithms(launch_params(c))) out.push_back({0, 1, algo});
  }
  if (!out.empty() && !uses_source("qdeploy")) return out;
  for (const Candidate& own : own_candidates(c)) out.push_back(own);
  return out;
}

// qdeploy's own: the tile configurations of the layer's precision, with split-K where it can pay off, through a
// workspace and a second kernel or inside a cluster (KernelPolicy::cluster_split off leaves the latter out, and the
// policy's other switches their kernel families). A bit-exact SiLU layer (--int8-mode bitexact) takes only those
// whose epilogue has the exact path: staged tiles and the workspace's split-K (the register epilogue is within 1
// LSB; timing under compute-sanitizer picked it and broke bit-exactness).
std::vector<Lowerer::Candidate> Lowerer::own_candidates(const ConvLayer& c) const {
  const ConvParams p = launch_params(c);
  std::vector<Candidate> out;
  const int64_t mk = static_cast<int64_t>(p.N) * p.OH * p.OW * p.K;
  const int ktiles = p.Kp / (c.int8 ? 64 : 32);  // the K loop's steps: 64 int8 or 32 fp16 elements
  const qdeploy::KernelPolicy& policy = in_.opt->kernel_policy;
  const bool no_cluster_split = !policy.cluster_split;
  for (int k = 0; k < conv_igemm_configs(); ++k) {
    if (conv_igemm_config_int8(k) != c.int8) continue;
    for (int splits : {1, 2, 4, 8}) {
      if (splits > 1 && (mk > (int64_t{1} << 21) || ktiles < 4 * splits)) continue;
      for (bool cluster : {false, true}) {
        if (cluster && no_cluster_split) continue;
        ConvParams q = p;
        q.splits = splits;
        q.split_in_cluster = cluster;
        if ((cluster && splits == 1) || !conv_igemm_config_fits(k, q) || !conv_igemm_config_allowed(k, q, policy)) {
          continue;
        }
        const bool own_epilogue = splits == 1 || cluster;  // else conv_splitk_epilogue's, which is exact
        if (q.exact_silu && q.act == Act::kSilu && own_epilogue && !conv_igemm_config_staged(k)) continue;
        out.push_back({k, splits, -1, cluster});
      }
    }
  }
  return out;
}

// Sets the layer up to run `cand` (`warm`: a cuDNN algorithm gets its first call now; timing makes its own).
Status Lowerer::use(ConvLayer* c, const Candidate& cand, bool warm) const {
  c->cudnn.reset();
  c->config = cand.config;
  c->p.splits = cand.splits;
  c->p.split_in_cluster = cand.cluster;
  c->info.kernel = candidate_name(cand);
  if (cand.algo < 0) return Status::ok();
  PackedConv& w = *c->w;
  const size_t row = static_cast<size_t>(w.R) * w.S * w.C;
  if (w.Kp != static_cast<int>(row) && !w.dense.get()) {  // drop the row padding
    QD_RETURN_IF_ERROR(w.dense.alloc(row * w.K * sizeof(__half)));
    QD_CUDA_TRY(cudaMemcpy2D(w.dense.get(), row * sizeof(__half), w.w.get(), w.Kp * sizeof(__half),
                             row * sizeof(__half), w.K, cudaMemcpyDeviceToDevice));
  }
  c->cudnn =
      QD_TRY(CudnnConv::create(launch_params(*c), cand.algo, w.dense.get() ? w.dense.get() : w.w.get(), warm));
  return Status::ok();
}

// Applies a remembered choice; false when it names no candidate this build may use.
bool Lowerer::apply(ConvLayer* c, const std::string& name) const {
  if (name.rfind("cudnn_", 0) == 0) {
    if (c->int8 || !uses_source("cudnn")) return false;
    for (int algo = 0; algo < 8; ++algo) {
      const Candidate cand{0, 1, algo};
      if (candidate_name(cand) == name) return use(c, cand).is_ok();
    }
    return false;
  }
  // Without qdeploy among the sources, an fp16 layer takes qdeploy's kernels only where cuDNN has none.
  const bool own = c->int8 || uses_source("qdeploy");
  for (const Candidate& cand : own ? own_candidates(*c) : candidates(*c)) {
    if (cand.algo < 0 && candidate_name(cand) == name) return use(c, cand).is_ok();
  }
  return false;
}

// A conv layer as plan/tactics.h's selection sees it: its candidates by name.
class Lowerer::ConvTactics final : public TacticLayer {
 public:
  ConvTactics(const Lowerer& lw, ConvLayer* c) : lw_(lw), c_(c) {}
  std::string signature() const override { return Lowerer::signature(*c_); }
  std::string legacy_signature() const override { return c_->out2 >= 0 ? Lowerer::legacy_signature(*c_) : ""; }
  int batch() const override { return c_->p.N; }
  std::vector<Tactic> tactics() const override {
    std::vector<Tactic> out;
    for (const Candidate& c : candidates()) out.push_back({candidate_name(c), optional(c), c.algo < 0});
    return out;
  }
  bool apply(const std::string& name) override { return lw_.apply(c_, name); }
  // The candidate of that name, set up for timing (a cuDNN algorithm gets its first call from the timer).
  Expected<Candidate> prepare(const std::string& name) const {
    for (const Candidate& c : candidates()) {
      if (candidate_name(c) != name) continue;
      QD_RETURN_IF_ERROR(lw_.use(c_, c, false));
      return c;
    }
    return internal("no candidate " + name + " for conv '" + c_->info.name + "'");
  }
  ConvLayer* layer() const { return c_; }

 private:
  // Asked once per layer: cuDNN's list comes from a query.
  const std::vector<Candidate>& candidates() const {
    if (!listed_) cands_ = lw_.candidates(*c_), listed_ = true;
    return cands_;
  }
  const Lowerer& lw_;
  ConvLayer* c_;
  mutable std::vector<Candidate> cands_;
  mutable bool listed_ = false;
};

// Times conv candidates on scratch memory laid out like a real run (contents do not matter for speed), made on
// first use.
class Lowerer::ConvTimer final : public TacticTimer {
 public:
  explicit ConvTimer(const Lowerer& lw) : lw_(lw) {}
  ~ConvTimer() override {
    if (!s_) return;
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
    cudaStreamSynchronize(s_);
    cudaStreamDestroy(s_);
  }
  Expected<float> time(TacticLayer& layer, const Tactic& t) override {
    QD_RETURN_IF_ERROR(ready());
    auto& l = static_cast<ConvTactics&>(layer);
    ConvLayer* c = l.layer();
    QD_RETURN_IF_ERROR(l.prepare(t.name).status());
    if (c->workspace_bytes() > workspace_.size()) QD_RETURN_IF_ERROR(workspace_.alloc(c->workspace_bytes()));
    c->workspace = static_cast<float*>(workspace_.get());
    std::vector<float> ms;
    Status st;
    for (int rep = 0; rep < 7 && st.is_ok(); ++rep) {
      cudaEventRecord(e0_, s_);
      for (int j = 0; j < 3 && st.is_ok(); ++j) st = c->enqueue(*lw_.inst_, *ptrs_, s_);
      cudaEventRecord(e1_, s_);
      cudaEventSynchronize(e1_);
      float x = 0;
      cudaEventElapsedTime(&x, e0_, e1_);
      if (rep > 0) ms.push_back(x);  // the first round warms up
    }
    c->workspace = nullptr;
    if (!st.is_ok()) {  // leave the stream usable for the next candidate
      cudaStreamSynchronize(s_);
      cudaGetLastError();
      return st;
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  Status refine(const std::map<std::string, std::vector<std::string>>& close, TacticChoices* choices) override {
    QD_RETURN_IF_ERROR(ready());
    return lw_.refine_in_graph(close, *ptrs_, &workspace_, s_, e0_, e1_, choices);
  }

 private:
  Status ready() {
    if (s_) return Status::ok();
    const Instance& inst = *lw_.inst_;
    QD_RETURN_IF_ERROR(arena_.alloc(std::max<size_t>(inst.arena_bytes, 256)));
    for (size_t k = 0; k < inst.slot_names.size(); ++k) {
      io_.push_back(std::make_unique<DeviceBuffer>());
      QD_RETURN_IF_ERROR(io_.back()->alloc(std::max<size_t>(inst.slot_bytes(k), 256)));
      io_ptrs_.push_back(io_.back()->get());
    }
    QD_CUDA_TRY(cudaMemset(arena_.get(), 0, arena_.size()));
    ptrs_.emplace(Pointers{static_cast<char*>(arena_.get()), &io_ptrs_, &inst.buffer_offsets});
    QD_CUDA_TRY(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    cudaEventCreate(&e0_);
    cudaEventCreate(&e1_);
    return Status::ok();
  }
  const Lowerer& lw_;
  DeviceBuffer arena_, workspace_;
  std::vector<std::unique_ptr<DeviceBuffer>> io_;
  std::vector<void*> io_ptrs_;
  std::optional<Pointers> ptrs_;
  cudaStream_t s_ = nullptr;
  cudaEvent_t e0_ = nullptr, e1_ = nullptr;
};

// Each conv's kernel by plan/tactics.h's policy: recorded, timed here, the nearest batch's or the first candidate.
Status Lowerer::choose_kernels() {
  const PdlOff pdl(!in_.opt->kernel_policy.pdl);  // timed as they will run
  std::vector<ConvTactics> convs;
  convs.reserve(conv_layers_.size());
  std::vector<TacticLayer*> layers;
  for (int li : conv_layers_) {
    convs.emplace_back(*this, static_cast<ConvLayer*>(inst_->layers[li].get()));
    layers.push_back(&convs.back());
  }
  TacticPolicy policy;
  policy.frozen = in_.frozen;
  policy.tune = in_.tune;
  policy.profile = !in_.opt->max_shapes.empty();
  ConvTimer timer(*this);
  QD_RETURN_IF_ERROR(select_tactics(layers, in_.choices, policy, &timer).status());
  // A conv workspace per stream, after the planned activations (the layers of a stream run one at a time).
  size_t ws[2] = {0, 0};
  for (int li : conv_layers_) {
    const auto* c = static_cast<ConvLayer*>(inst_->layers[li].get());
    ws[c->side] = std::max(ws[c->side], c->workspace_bytes());
    inst_->uses_cudnn = inst_->uses_cudnn || c->cudnn;
  }
  inst_->splitk_offset = (inst_->arena_bytes + 255) / 256 * 256;
  inst_->side_splitk_offset = (inst_->splitk_offset + ws[0] + 255) / 256 * 256;
  if (ws[0] || ws[1]) inst_->arena_bytes = inst_->side_splitk_offset + ws[1];
  return Status::ok();
}

// The picks made one layer at a time (each timed alone, its weights and input hot in L2 from the launch before)
// checked in the network as it runs: where other configurations of a layer timed close to the pick alone
// (plan/tactics.h's near_ties), the whole network runs as a CUDA graph with each in turn, launched alternately with
// the graph of the picks so far (clock drift stays out of the difference), and the faster kept by at least 0.5% of
// the medians (0.2% at batch 1, refine_keep). Alone, tile configurations often time within a few percent of each other while in
// the network one is 5-20% slower, so builds of the same code picked differently and ran up to 13% apart. Not
// where a cuDNN kernel was picked (its handles must exist before a capture) nor with KernelPolicy::graph_refine off
// (A/B runs).
Status Lowerer::refine_in_graph(const std::map<std::string, std::vector<std::string>>& close, const Pointers& ptrs,
                       DeviceBuffer* workspace, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1,
                       TacticChoices* choices) const {
  if (!in_.opt->kernel_policy.graph_refine) return Status::ok();
  std::map<std::string, std::vector<ConvLayer*>> by_sig;  // the layers of each signature with near ties
  std::vector<ConvLayer*> convs;
  for (int li : conv_layers_) {
    auto* c = static_cast<ConvLayer*>(inst_->layers[li].get());
    if (c->cudnn) return Status::ok();
    convs.push_back(c);
    const std::string sig = signature(*c);
    if (const auto it = close.find(sig); it != close.end() && it->second.size() > 1) by_sig[sig].push_back(c);
  }
  if (by_sig.empty()) return Status::ok();
  const auto set_all = [&](const std::vector<ConvLayer*>& layers, const std::string& name) -> Status {
    for (ConvLayer* c : layers) {
      if (!apply(c, name)) return internal("kernel " + name + " cannot be set up for conv '" + c->info.name + "'");
    }
    return Status::ok();
  };
  // One scratch workspace for every split-K layer (they run one after another), as large as any candidate needs.
  size_t ws = 0;
  for (ConvLayer* c : convs) ws = std::max(ws, c->workspace_bytes());
  for (const auto& [sig, layers] : by_sig) {
    for (const Candidate& cand : candidates(*layers.front())) {
      const auto& names = close.at(sig);
      if (std::find(names.begin(), names.end(), candidate_name(cand)) == names.end()) continue;
      ConvParams q = layers.front()->p;
      q.splits = cand.splits;
      q.split_in_cluster = cand.cluster;
      ws = std::max(ws, conv_igemm_workspace(q));
    }
  }
  if (ws > workspace->size()) QD_RETURN_IF_ERROR(workspace->alloc(ws));
  for (ConvLayer* c : convs) c->workspace = static_cast<float*>(workspace->get());
  // The whole network with the layers' current kernels, as an instantiated CUDA graph.
  const auto capture = [&](cudaGraphExec_t* exec) -> Status {
    cudaGraph_t graph = nullptr;
    QD_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    Status st;
    for (const auto& l : inst_->layers) {
      st = l->enqueue(*inst_, ptrs, s);
      if (!st.is_ok()) break;
    }
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    QD_RETURN_IF_ERROR(st);
    QD_CUDA_TRY(end);
    const cudaError_t made = cudaGraphInstantiate(exec, graph, 0);
    cudaGraphDestroy(graph);
    QD_CUDA_TRY(made);
    return Status::ok();
  };
  // The medians of the two graphs' GPU times, launched alternately 30 times each after 4 rounds.
  const auto medians = [&](cudaGraphExec_t a, cudaGraphExec_t b, float* ma, float* mb) -> Status {
    std::vector<float> ta, tb;
    for (int i = 0; i < 34; ++i) {
      for (int side = 0; side < 2; ++side) {
        QD_CUDA_TRY(cudaEventRecord(e0, s));
        QD_CUDA_TRY(cudaGraphLaunch(side ? b : a, s));
        QD_CUDA_TRY(cudaEventRecord(e1, s));
        QD_CUDA_TRY(cudaEventSynchronize(e1));
        float x = 0;
        QD_CUDA_TRY(cudaEventElapsedTime(&x, e0, e1));
        if (i >= 4) (side ? tb : ta).push_back(x);
      }
    }
    std::sort(ta.begin(), ta.end());
    std::sort(tb.begin(), tb.end());
    *ma = ta[ta.size() / 2];
    *mb = tb[tb.size() / 2];
    return Status::ok();
  };
  cudaGraphExec_t picked = nullptr;  // the graph of the picks so far
  Status st = capture(&picked);
  for (auto it = by_sig.begin(); it != by_sig.end() && st.is_ok(); ++it) {
    const std::vector<std::string>& cands = close.at(it->first);
    std::string kept = cands.front();
    for (size_t k = 1; k < cands.size() && st.is_ok(); ++k) {
      st = set_all(it->second, cands[k]);
      cudaGraphExec_t other = nullptr;
      float mp = 0.f, mo = 0.f;
      if (st.is_ok()) st = capture(&other);
      if (st.is_ok()) st = medians(picked, other, &mp, &mo);
      if (st.is_ok() && mo < mp * refine_keep(it->second.front()->p.N)) {
        kept = cands[k];
        (*choices)[it->first] = kept;
        std::swap(picked, other);
      }
      if (other) cudaGraphExecDestroy(other);
      if (st.is_ok()) st = set_all(it->second, kept);
    }
  }
  if (picked) cudaGraphExecDestroy(picked);
  for (ConvLayer* c : convs) c->workspace = nullptr;
  if (!st.is_ok()) {  // a network that cannot be captured or run here keeps the picks made alone
    cudaStreamSynchronize(s);
    cudaGetLastError();
    for (const auto& [sig, layers] : by_sig) {
      (*choices)[sig] = close.at(sig).front();
      QD_RETURN_IF_ERROR(set_all(layers, close.at(sig).front()));
    }
  }
  return Status::ok();
}

}  // namespace qd::cuda
