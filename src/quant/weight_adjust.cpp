#include "quant/weight_adjust.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ops/interpret.h"
#include "ops/quantize.h"
#include "ops/window.h"
#include "quant/int8.h"

namespace qd {

namespace {

// The sums one Conv's fit needs, per group (K = C/group * kh * kw patch values, mg = output channels per group).
struct GroupSums {
  std::vector<double> h;     // [K, K]  sum x~ x~^T
  std::vector<double> g;     // [K, mg] sum x~ (d . e_j), d = (x~ - x) . W_j
  std::vector<double> mu;    // [K]     sum x~
  std::vector<double> dsum;  // [mg]    sum d
  std::vector<double> dsq;   // [mg]    sum d^2
};

struct ConvFit {
  int node = -1;
  std::string name, weight;
  const Tensor* w = nullptr;
  float sx = 1.f;  // input scale
  int64_t k = 0, mg = 0, groups = 1;
  std::vector<GroupSums> sums;
  int64_t samples = 0;
};

// Samples `count` output positions of the Conv over the batch and adds their patches to the sums.
Status accumulate(ConvFit& f, const Graph& g, const Tensor& x, int count, std::mt19937& rng) {
  const Node& n = g.nodes[f.node];
  if (x.rank() != 4) return Status::ok();
  Shape out;
  const ops::ConvGeom geo = QD_TRY(ops::conv_geom(n, x.shape(), f.w->shape(), &out));
  const int64_t positions = geo.n * geo.oh * geo.ow;
  if (positions <= 0) return Status::ok();
  const int64_t s = std::min<int64_t>(count, positions);
  const int64_t cg = geo.c / geo.group;
  std::uniform_int_distribution<int64_t> pick(0, positions - 1);
  std::vector<int64_t> pos(static_cast<size_t>(s));
  for (auto& p : pos) p = pick(rng);
  std::vector<float> xt(static_cast<size_t>(s * f.k)), xd(static_cast<size_t>(s * f.k));
  std::vector<float> d(static_cast<size_t>(s * f.mg)), hk(static_cast<size_t>(f.k * f.k)),
      gk(static_cast<size_t>(f.k * f.mg));
  const float* px = x.data<float>();
  const float* pw = f.w->data<float>();
  for (int64_t gi = 0; gi < geo.group; ++gi) {
    for (int64_t r = 0; r < s; ++r) {
      const int64_t b = pos[r] / (geo.oh * geo.ow), oy = pos[r] / geo.ow % geo.oh, ox = pos[r] % geo.ow;
      float* rt = &xt[r * f.k];
      float* rd = &xd[r * f.k];
      for (int64_t ci = 0; ci < cg; ++ci) {
        const float* plane = px + ((b * geo.c) + gi * cg + ci) * geo.h * geo.w;
        for (int64_t i = 0; i < geo.kh; ++i) {
          const int64_t iy = oy * geo.sh - geo.ph + i * geo.dh;
          for (int64_t j = 0; j < geo.kw; ++j) {
            const int64_t ix = ox * geo.sw - geo.pw + j * geo.dw;
            const float v = (iy >= 0 && iy < geo.h && ix >= 0 && ix < geo.w) ? plane[iy * geo.w + ix] : 0.f;
            const float vq = ops::dequantize_value(ops::quantize_value(v, f.sx, 0, -128, 127), f.sx, 0);
            const int64_t idx = (ci * geo.kh + i) * geo.kw + j;
            rt[idx] = vq;
            rd[idx] = vq - v;
          }
        }
      }
    }
    const int K = static_cast<int>(f.k), M = static_cast<int>(f.mg), S = static_cast<int>(s);
    const float* wg = pw + gi * f.mg * f.k;  // [mg, K]
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, K, S, 1.f, xt.data(), K, xt.data(), K, 0.f, hk.data(), K);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, M, K, 1.f, xd.data(), K, wg, K, 0.f, d.data(), M);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, M, S, 1.f, xt.data(), K, d.data(), M, 0.f, gk.data(), M);
    GroupSums& gs = f.sums[gi];
    for (size_t i = 0; i < hk.size(); ++i) gs.h[i] += hk[i];
    for (size_t i = 0; i < gk.size(); ++i) gs.g[i] += gk[i];
    for (int64_t r = 0; r < s; ++r) {
      for (int64_t i = 0; i < f.k; ++i) gs.mu[i] += xt[r * f.k + i];
      for (int64_t j = 0; j < f.mg; ++j) {
        const double dv = d[r * f.mg + j];
        gs.dsum[j] += dv;
        gs.dsq[j] += dv * dv;
      }
    }
  }
  f.samples += s;
  return Status::ok();
}

// Fits one Conv from its sums: new weights (s_c q_c) and bias, and the report line.
void fit(const ConvFit& f, const Graph& g, const WeightAdjustOptions& opt, WeightAdjustResult* out) {
  const Node& n = g.nodes[f.node];
  const WeightQuant wq = quantize_weights(*f.w, 0);
  const int64_t m_total = f.mg * f.groups, K = f.k;
  std::vector<float> bias(static_cast<size_t>(m_total), 0.f);
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Tensor* bt = g.constant(n.inputs[2]);
    if (bt) std::copy(bt->data<float>(), bt->data<float>() + bt->numel(), bias.begin());
  }
  Tensor w_new(DType::kFloat32, f.w->shape());
  LayerAdjustment rep;
  rep.node = f.name;
  rep.weight = f.weight;
  rep.samples = f.samples;
  const double S = static_cast<double>(std::max<int64_t>(f.samples, 1));
  double err0 = 0, err1 = 0, shift_sq = 0;
  const bool centre = opt.bias_correction;  // the bias absorbs the mean: fit the rounding to the rest
  const bool fit_rounding = opt.adaround && f.samples >= static_cast<int64_t>(opt.min_samples_per_weight) * K;
  rep.rounding_fitted = fit_rounding;
  std::vector<double> hc, e0(static_cast<size_t>(f.mg * K)), p(static_cast<size_t>(f.mg * K)), u(static_cast<size_t>(K));
  for (int64_t gi = 0; gi < f.groups; ++gi) {
    const GroupSums& gs = f.sums[gi];
    // The group's errors of round-to-nearest, E0 [mg, K], and P = E0 H (H symmetric): every channel's H e at once.
    for (int64_t j = 0; j < f.mg; ++j) {
      const int64_t c = gi * f.mg + j;
      for (int64_t k = 0; k < K; ++k) {
        e0[j * K + k] = static_cast<double>(wq.q.data<int8_t>()[c * K + k]) * wq.scales[c] - f.w->data<float>()[c * K + k];
      }
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(f.mg), static_cast<int>(K),
                static_cast<int>(K), 1.0, e0.data(), static_cast<int>(K), gs.h.data(), static_cast<int>(K), 0.0,
                p.data(), static_cast<int>(K));
    if (fit_rounding) {  // the quadratic term the coordinate descent updates with, centred with bias correction
      hc = gs.h;
      if (centre) {
        for (int64_t a = 0; a < K; ++a) {
          for (int64_t b = 0; b < K; ++b) hc[a * K + b] -= gs.mu[a] * gs.mu[b] / S;
        }
      }
    }
    for (int64_t j = 0; j < f.mg; ++j) {
      const int64_t c = gi * f.mg + j;
      const float* w = f.w->data<float>() + c * K;
      const int8_t* q0 = wq.q.data<int8_t>() + c * K;
      const double s = wq.scales[c];
      std::vector<int> q(q0, q0 + K);
      std::vector<double> e(e0.begin() + j * K, e0.begin() + (j + 1) * K);
      // f(e) = e^T H e + 2 e^T g_j + sum d^2 (round-to-nearest), and the mean shift of the output.
      double quad = 0, lin = 0, emu = 0;
      for (int64_t k = 0; k < K; ++k) {
        quad += e[k] * p[j * K + k];
        lin += e[k] * gs.g[k * f.mg + j];
        emu += e[k] * gs.mu[k];
      }
      const double f0 = std::max(0.0, quad + 2 * lin + gs.dsq[j]);
      const double m0 = (emu + gs.dsum[j]) / S;
      err0 += f0;
      // The objective the rounding minimizes: f, or f less its mean part S m^2 (what is left after the bias).
      double cur = centre ? f0 - S * m0 * m0 : f0;
      if (fit_rounding && s > 0) {
        int64_t fixed = 0;  // the weight holding max|W_c| keeps +-127 (the scale re-derives from it)
        for (int64_t k = 1; k < K; ++k) {
          if (std::fabs(w[k]) > std::fabs(w[fixed])) fixed = k;
        }
        // u = (gradient of the objective) / 2 = Hc e + g_j (centred: minus mu (mu.e + dsum) / S).
        for (int64_t k = 0; k < K; ++k) {
          u[k] = p[j * K + k] + gs.g[k * f.mg + j] - (centre ? gs.mu[k] * (emu + gs.dsum[j]) / S : 0.0);
        }
        for (int sweep = 0; sweep < opt.max_sweeps; ++sweep) {
          int64_t changed = 0;
          for (int64_t k = 0; k < K; ++k) {
            if (k == fixed) continue;
            const double r = w[k] / s;
            const int lo = static_cast<int>(std::max(-127.0, std::floor(r)));
            const int hi = static_cast<int>(std::min(127.0, std::ceil(r)));
            if (lo >= hi) continue;
            const int alt = q[k] == lo ? hi : lo;
            const double delta = s * (alt - q[k]);
            const double gain = 2 * delta * u[k] + delta * delta * hc[k * K + k];
            if (!(gain < -1e-12 * delta * delta * (1 + std::fabs(hc[k * K + k])))) continue;
            q[k] = alt;
            e[k] += delta;
            cur += gain;
            for (int64_t a = 0; a < K; ++a) u[a] += delta * hc[a * K + k];
            ++changed;
          }
          if (changed == 0) break;
        }
      }
      double emu_final = 0;
      for (int64_t k = 0; k < K; ++k) {
        w_new.data<float>()[c * K + k] = static_cast<float>(s * q[k]);
        rep.flipped += q[k] != q0[k];
        emu_final += e[k] * gs.mu[k];
      }
      if (opt.bias_correction) {
        const double shift = (emu_final + gs.dsum[j]) / S;
        bias[c] -= static_cast<float>(shift);
        shift_sq += shift * shift;
      }
      err1 += std::max(0.0, cur);
    }
  }
  rep.err_nearest = err0 / (S * m_total);
  rep.err_adjusted = err1 / (S * m_total);
  rep.bias_shift_rms = std::sqrt(shift_sq / m_total);
  if (fit_rounding) out->weights[f.weight] = std::move(w_new);
  if (opt.bias_correction) out->biases[f.name] = std::move(bias);
  out->layers.push_back(std::move(rep));
}

}  // namespace

Expected<WeightAdjustResult> adjust_weights(const Graph& prepared, const std::map<std::string, float>& act_scales,
                                            int num_batches, const AdjustBatchFn& batches,
                                            const WeightAdjustOptions& opt) {
  if (opt.samples_per_batch < 1) return invalid("samples per batch must be >= 1");
  const Graph& g = prepared;
  std::map<int, int> uses;  // weight constant -> number of nodes reading it
  for (const Node& n : g.nodes) {
    for (int in : n.inputs) {
      if (g.is_constant(in)) ++uses[in];
    }
  }
  std::vector<ConvFit> fits;
  std::map<int, std::vector<size_t>> by_input;  // value -> the fits reading it
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != OpType::Conv || n.inputs.size() < 2) continue;
    const Tensor* w = g.constant(n.inputs[1]);
    const Value& x = g.values[n.inputs[0]];
    if (!w || w->dtype() != DType::kFloat32 || w->rank() != 4 || x.dtype != DType::kFloat32) continue;
    if (uses[n.inputs[1]] != 1 || matches_any(n.name, opt.skip_layers)) continue;
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && (!g.constant(n.inputs[2]) || uses[n.inputs[2]] != 1)) continue;
    auto sc = act_scales.find(x.name);
    if (sc == act_scales.end() || !(sc->second > 0)) continue;
    ConvFit f;
    f.node = static_cast<int>(i);
    f.name = n.name;
    f.weight = g.values[n.inputs[1]].name;
    f.w = w;
    f.sx = sc->second;
    f.groups = QD_TRY(n.attrs.get_int("group", 1));
    if (f.groups < 1 || w->shape()[0] % f.groups != 0) continue;
    f.k = w->shape()[1] * w->shape()[2] * w->shape()[3];
    f.mg = w->shape()[0] / f.groups;
    f.sums.resize(static_cast<size_t>(f.groups));
    for (GroupSums& s : f.sums) {
      s.h.assign(static_cast<size_t>(f.k * f.k), 0.0);
      s.g.assign(static_cast<size_t>(f.k * f.mg), 0.0);
      s.mu.assign(static_cast<size_t>(f.k), 0.0);
      s.dsum.assign(static_cast<size_t>(f.mg), 0.0);
      s.dsq.assign(static_cast<size_t>(f.mg), 0.0);
    }
    by_input[n.inputs[0]].push_back(fits.size());
    fits.push_back(std::move(f));
  }
  WeightAdjustResult out;
  if (fits.empty() || !(opt.adaround || opt.bias_correction)) return out;
  for (int b = 0; b < num_batches; ++b) {
    const std::map<std::string, Tensor> feeds = QD_TRY(batches(b));
    std::mt19937 rng(opt.seed * 7919u + static_cast<uint32_t>(b));
    Status st = Status::ok();
    auto visit = [&](int v, const Tensor& t) {
      auto it = by_input.find(v);
      if (it == by_input.end() || !st.is_ok()) return;
      for (size_t fi : it->second) {
        Status s = accumulate(fits[fi], g, t, opt.samples_per_batch, rng);
        if (!s.is_ok()) st = s.at_node(fits[fi].name, "Conv");
      }
    };
    for (int v : g.inputs) {
      auto it = feeds.find(g.values[v].name);
      if (it != feeds.end()) visit(v, it->second);
    }
    ReferenceRunOptions ro;
    ro.observer = [&](const Node& n, const std::vector<const Tensor*>& outs) {
      for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i] && n.outputs[i] >= 0 && outs[i]->dtype() == DType::kFloat32) visit(n.outputs[i], *outs[i]);
      }
    };
    QD_RETURN_IF_ERROR(run_reference(g, feeds, ro).status());
    QD_RETURN_IF_ERROR(st);
    if (opt.progress) opt.progress(b + 1);
  }
  for (const ConvFit& f : fits) {
    if (f.samples > 0) fit(f, g, opt, &out);
  }
  return out;
}

Status apply_weight_adjustments(Graph& g, const WeightAdjustResult& r) {
  for (const auto& [name, w] : r.weights) {
    const int v = g.find_value(name);
    Tensor* t = v >= 0 && g.constants.count(v) ? &g.constants.at(v) : nullptr;
    if (!t || t->shape() != w.shape()) {
      return invalid("adjusted weight '" + name + "' is not a constant of that shape in the model to write");
    }
    *t = w;
  }
  for (const auto& entry : r.biases) {
    const std::string& node = entry.first;  // named references: clang 14 cannot capture a structured binding
    const auto& bias = entry.second;
    auto it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.name == node; });
    if (it == g.nodes.end() || it->op != OpType::Conv) return invalid("no Conv '" + node + "' in the model to write");
    const Tensor bt = Tensor::from_f32({static_cast<int64_t>(bias.size())}, bias);
    if (it->inputs.size() > 2 && it->inputs[2] >= 0) {
      const int v = it->inputs[2];
      if (!g.constants.count(v) || g.constants.at(v).numel() != static_cast<int64_t>(bias.size())) {
        return invalid("the bias of Conv '" + node + "' is not a constant of " + std::to_string(bias.size()) +
                       " values in the model to write");
      }
      g.constants.at(v) = bt;
    } else {
      const std::string vname = node + "/bias_corrected";
      int v = g.add_value(vname);
      g.values[v].dtype = DType::kFloat32;
      g.values[v].shape = bt.shape();
      g.values[v].has_shape = true;
      g.constants[v] = bt;
      it->inputs.resize(3);
      it->inputs[2] = v;
    }
  }
  return Status::ok();
}

}  // namespace qd
