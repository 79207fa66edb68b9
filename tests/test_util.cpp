#include "test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "onnx/importer.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "quant/calib_cache.h"
#include "quant/calibrator.h"

namespace qd::test {

std::string source_dir() {
  const char* env = std::getenv("QD_SOURCE_DIR");
#ifdef QD_SOURCE_DIR
  return env ? env : QD_SOURCE_DIR;
#else
  return env ? env : ".";
#endif
}

std::string shared_timing_cache() {
  const char* env = std::getenv("QD_TEST_TIMING_CACHE");
  return env ? env : "";
}

std::string temp_dir(const std::string& tag) {
  static std::mt19937 rng(std::random_device{}());
  const auto base = std::filesystem::temp_directory_path() / ("qd_test_" + tag + "_" + std::to_string(rng()));
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  return base.string();
}

Tensor random_f32(const Shape& shape, uint32_t seed, float lo, float hi) {
  Tensor t(DType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

Image pattern_image(int w, int h, uint32_t seed) {
  Image img(w, h);
  uint32_t s = seed;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      s = s * 1664525u + 1013904223u;
      uint8_t* p = img.pixel(x, y);
      p[0] = static_cast<uint8_t>((x * 7 + y * 3) & 255);
      p[1] = static_cast<uint8_t>(s >> 24);
      p[2] = static_cast<uint8_t>(((x / 16 + y / 16) & 1) ? 200 : 30);
    }
  }
  return img;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return std::numeric_limits<double>::infinity();
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(a.get_f64(i) - b.get_f64(i));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

double snr_db(const Tensor& ref, const Tensor& x) {
  double s = 0, e = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double r = ref.get_f64(i), d = r - x.get_f64(i);
    s += r * r;
    e += d * d;
  }
  return e == 0 ? 200.0 : 10.0 * std::log10(s / e);
}

Status write_minmax_cache(const std::string& model, const std::string& input, const Tensor& feed,
                          const std::string& path) {
  auto g = import_onnx_file(model);
  if (!g) return g.status();
  return write_minmax_cache(*g, {{input, feed}}, path);
}

Status write_minmax_cache(const Graph& graph, const std::map<std::string, Tensor>& feeds, const std::string& path) {
  Graph g = graph;
  PrepareOptions prep;
  for (const auto& [name, t] : feeds) prep.input_shapes[name] = t.shape();
  QD_RETURN_IF_ERROR(prepare_graph(g, prep));
  CalibOptions co;
  co.algo = CalibAlgo::kMinMax;
  Calibrator cal(g, co);
  QD_RETURN_IF_ERROR(cal.observe_range(feeds));
  return write_calib_cache(path, cal.result());
}

Graph with_dynamic_batch(Graph g) {
  for (int v : g.inputs) {
    Value& x = g.values[v];
    x.shape[0] = -1;
    x.dim_names.assign(x.shape.size(), "");
    x.dim_names[0] = "batch";
  }
  for (const Node& n : g.nodes) {
    if (n.op != OpType::Reshape || n.inputs.size() < 2 || !g.is_constant(n.inputs[1])) continue;
    Tensor& shape = g.constants[n.inputs[1]];
    if (shape.dtype() != DType::kInt64 || shape.numel() == 0 || shape.get_i64(0) != 1) continue;
    shape = shape.clone();  // copies share buffers
    shape.data<int64_t>()[0] = 0;
  }
  return g;
}

int GraphBuilder::input(const std::string& name, const Shape& s) {
  const int v = g.add_value(name);
  g.values[v].dtype = DType::kFloat32;
  g.values[v].shape = s;
  g.values[v].has_shape = true;
  g.inputs.push_back(v);
  return v;
}

int GraphBuilder::constant(const std::string& name, Tensor t) { return g.add_constant(name, std::move(t)); }

int GraphBuilder::node(OpType op, const std::string& name, std::vector<int> in, AttrMap attrs) {
  const int out = g.add_value(name + "_out");
  g.nodes.push_back({name, op, 13, std::move(attrs), std::move(in), {out}});
  return out;
}

Graph GraphBuilder::prepared() {
  g.relink();
  Graph p = g;
  const Status st = prepare_graph(p, {});
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return p;
}

int count_op(const Graph& g, OpType op) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [op](const Node& n) { return n.op == op; }));
}

const Node* find_node(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

void expect_same_outputs(const Graph& a, const Graph& b, const std::map<std::string, Tensor>& in, double tol) {
  auto ya = run_reference(a, in), yb = run_reference(b, in);
  ASSERT_TRUE(ya) << ya.status().to_string();
  ASSERT_TRUE(yb) << yb.status().to_string();
  ASSERT_EQ(ya->size(), yb->size());
  for (size_t i = 0; i < ya->size(); ++i) {
    EXPECT_EQ(a.values[a.outputs[i]].name, b.values[b.outputs[i]].name);
    ASSERT_EQ((*ya)[i].shape(), (*yb)[i].shape());
    double lo = 0, hi = 0;
    for (int64_t k = 0; k < (*ya)[i].numel(); ++k) {
      lo = std::min(lo, (*ya)[i].get_f64(k));
      hi = std::max(hi, (*ya)[i].get_f64(k));
    }
    EXPECT_LE(max_abs_diff((*ya)[i], (*yb)[i]), tol * std::max(1.0, hi - lo)) << "output " << i;
  }
}

}  // namespace qd::test
