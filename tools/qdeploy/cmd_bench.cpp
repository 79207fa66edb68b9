// qdeploy bench MODEL|PLAN [--batch 1,8,32] [--warmup N] [--iterations N] [--cuda-graph] [--streams N]
// [--export-profile F.json] [--export-layer-info F.json] [--export-timeline F.json] [--json]: a trtexec-style speed
// summary per batch size.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "build_flags.h"
#include "commands.h"
#include "core/file_io.h"
#include "core/progress.h"
#include "qdeploy/device.h"
#include "qdeploy/engine.h"
#include "runtime/io_format.h"
#include "runtime/plan_sections.h"
#include "runtime/public_types.h"
#include "runtime/timeline_json.h"


namespace qd::cli {

namespace {

struct BenchArgs {
  std::string model;
  BuildFlags flags;
  std::vector<int> batches;
  int warmup = 20, iterations = 200;
  int streams = 1;  // contexts enqueueing concurrently for the throughput figure (trtexec's --streams)
  bool cuda_graph = false;
  std::string profile_path, layer_info_path, timeline_path, json_path;
};

struct Stats {
  double min = 0, mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0;
};

Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))]; };
  s.min = v.front();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  s.median = pct(0.5);
  s.p90 = pct(0.9);
  s.p95 = pct(0.95);
  s.p99 = pct(0.99);
  return s;
}

nlohmann::json stats_json(const Stats& s) {
  return {{"min", s.min}, {"mean", s.mean}, {"median", s.median}, {"p90", s.p90}, {"p95", s.p95}, {"p99", s.p99}};
}

void print_stats(const char* what, const Stats& s) {
  std::printf("  %-18s min %.4f  mean %.4f  median %.4f  p90 %.4f  p95 %.4f  p99 %.4f ms\n", what, s.min, s.mean,
              s.median, s.p90, s.p95, s.p99);
}

std::map<std::string, Shape> shapes_for_batch(const Engine& e, int batch) {
  std::map<std::string, Shape> shapes;
  for (const TensorDesc& d : e.inputs()) {
    Shape s = d.shape;
    if (!s.empty()) s[0] = batch;
    for (auto& dim : s) {
      if (dim < 0) dim = 1;
    }
    shapes[d.name] = s;
  }
  return shapes;
}

std::map<std::string, Tensor> random_feeds(const Engine& e, const std::map<std::string, Shape>& shapes) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  std::map<std::string, Tensor> feeds;
  for (const TensorDesc& d : e.inputs()) {
    Tensor t(feed_dtype(d), shapes.at(d.name));
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, dist(rng));
    feeds[d.name] = std::move(t);
  }
  return feeds;
}

// Engines without a device queue (the CPU): wall time of whole runs.
Expected<nlohmann::json> bench_host(Engine& e, const BenchArgs& a, int batch) {
  auto shapes = shapes_for_batch(e, batch);
  auto feeds = random_feeds(e, shapes);
  for (int i = 0; i < a.warmup; ++i) QD_TRY(e.run(feeds));
  std::vector<double> lat;
  Progress progress("batch " + std::to_string(batch), a.iterations);
  for (int i = 0; i < a.iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    QD_TRY(e.run(feeds));
    lat.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    progress.update(i + 1);
  }
  const Stats s = stats_of(lat);
  std::printf("batch %d: throughput %.1f images/s\n", batch, batch * 1000.0 / s.mean);
  print_stats("latency", s);
  return nlohmann::json{{"batch", batch}, {"throughput_ips", batch * 1000.0 / s.mean}, {"latency_ms", stats_json(s)}};
}

// A failed public-API status as the CLI's.
#define QD_API(expr) QD_RETURN_IF_ERROR(from_public(expr))

// A layer as --export-layer-info and --export-profile describe it (docs/runtime.md#per-layer-json).
nlohmann::json layer_json(const qdeploy::LayerInfo& l) {
  return {{"name", l.name},          {"kind", l.kind},
          {"kernel", l.kernel},      {"precision", l.precision},
          {"input_format", l.in_format}, {"output_format", l.out_format},
          {"macs", l.macs},          {"stream", l.stream}};
}

// Engines with a device queue (the GPU), through the public API's contexts, streams and events: per iteration,
// events around the host-to-device copies, the enqueued model and the device-to-host copies (pinned host memory);
// throughput from back-to-back enqueues without host synchronisation.
Expected<nlohmann::json> bench_device(const qdeploy::Engine& e, const Engine& host, const BenchArgs& a, int batch,
                                      nlohmann::json* profile, nlohmann::json* layers, nlohmann::json* timeline) {
  auto shapes = shapes_for_batch(host, batch);
  auto feeds = random_feeds(host, shapes);
  std::map<std::string, qdeploy::HostTensor> host_feeds;
  for (const auto& [name, t] : feeds) host_feeds[name] = to_public(t);
  std::unique_ptr<qdeploy::ExecutionContext> ctx = QD_TRY(from_public(e.create_context()));
  QD_API(ctx->use_cuda_graph(a.cuda_graph));
  QD_API(ctx->set_input_shapes(shapes));
  const std::string split = ctx->batch_split();
  if (split != kSplitWhole) std::printf("batch %d runs as %s\n", batch, split_words(split));
  const qdeploy::Stream stream = QD_TRY(from_public(qdeploy::Stream::create()));
  void* s = stream.handle();
  struct Copy {
    qdeploy::PinnedBuffer host;
    void* dev;
    size_t bytes;
  };
  std::vector<Copy> h2d, d2h;
  for (const TensorDesc& d : host.inputs()) {
    const std::string& name = d.name;
    // The device buffer holds the binding's memory (e.g. fp16 NHWC for --input-format fp16:nhwc).
    const Tensor t = is_binding_memory(feeds.at(name), d) ? feeds.at(name) : QD_TRY(to_binding_format(feeds.at(name), d));
    qdeploy::PinnedBuffer h = QD_TRY(from_public(qdeploy::PinnedBuffer::create(t.nbytes())));
    std::memcpy(h.data(), t.raw(), t.nbytes());
    h2d.push_back({h, ctx->device_buffer(name), t.nbytes()});
  }
  for (const qdeploy::TensorInfo& d : ctx->outputs()) {
    const size_t bytes = static_cast<size_t>(qdeploy::volume(d.shape)) * qdeploy::data_type_size(d.dtype);
    d2h.push_back({QD_TRY(from_public(qdeploy::PinnedBuffer::create(bytes))), ctx->device_buffer(d.name), bytes});
  }
  std::vector<qdeploy::Event> ev;
  for (int i = 0; i < 4; ++i) ev.push_back(QD_TRY(from_public(qdeploy::Event::create())));
  auto one = [&](bool copies) -> Status {
    if (copies) {
      QD_API(ev[0].record(s));
      for (auto& c : h2d) {
        QD_API(qdeploy::copy_async(c.dev, c.host.data(), c.bytes, qdeploy::CopyKind::kHostToDevice, s));
      }
    }
    QD_API(ev[1].record(s));
    QD_API(ctx->enqueue(s));
    QD_API(ev[2].record(s));
    if (copies) {
      for (auto& c : d2h) {
        QD_API(qdeploy::copy_async(c.host.data(), c.dev, c.bytes, qdeploy::CopyKind::kDeviceToHost, s));
      }
      QD_API(ev[3].record(s));
    }
    return Status::ok();
  };
  auto elapsed = [&](int from, int to) {
    const auto ms = qdeploy::Event::elapsed_ms(ev[from], ev[to]);
    return ms ? static_cast<double>(*ms) : 0.0;
  };
  for (int i = 0; i < a.warmup; ++i) QD_RETURN_IF_ERROR(one(true));
  QD_API(stream.synchronize());
  std::vector<double> lat, h2d_ms, compute, d2h_ms, wall;
  for (int i = 0; i < a.iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    QD_RETURN_IF_ERROR(one(true));
    QD_API(ev[3].synchronize());
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    h2d_ms.push_back(elapsed(0, 1));
    compute.push_back(elapsed(1, 2));
    d2h_ms.push_back(elapsed(2, 3));
    lat.push_back(h2d_ms.back() + compute.back() + d2h_ms.back());
  }
  // Throughput: the model back to back, no copies, one synchronisation at the end; with --streams N, N contexts
  // (the first is ctx) each on its own stream, started together, the time until the last one ends.
  std::vector<std::unique_ptr<qdeploy::ExecutionContext>> extra;
  std::vector<qdeploy::Stream> extra_s;
  std::vector<qdeploy::Event> done;
  for (int k = 1; k < a.streams; ++k) {
    extra_s.push_back(QD_TRY(from_public(qdeploy::Stream::create())));
    void* t = extra_s.back().handle();
    extra.push_back(QD_TRY(from_public(e.create_context())));
    QD_API(extra.back()->use_cuda_graph(a.cuda_graph));
    QD_API(extra.back()->set_input_shapes(shapes));
    QD_API(extra.back()->upload(host_feeds, t));
    for (int i = 0; i < a.warmup; ++i) QD_API(extra.back()->enqueue(t));
    QD_API(extra_s.back().synchronize());
    done.push_back(QD_TRY(from_public(qdeploy::Event::create(false))));
  }
  QD_API(ev[0].record(s));
  for (size_t k = 0; k < extra.size(); ++k) QD_API(ev[0].wait_on(extra_s[k].handle()));
  for (int i = 0; i < a.iterations; ++i) {
    QD_API(ctx->enqueue(s));
    for (size_t k = 0; k < extra.size(); ++k) QD_API(extra[k]->enqueue(extra_s[k].handle()));
  }
  for (size_t k = 0; k < extra.size(); ++k) {
    QD_API(done[k].record(extra_s[k].handle()));
    QD_API(done[k].wait_on(s));
  }
  QD_API(ev[3].record(s));
  QD_API(ev[3].synchronize());
  const double total = elapsed(0, 3);
  const double ips = static_cast<double>(batch) * a.streams * a.iterations * 1000.0 / total;
  extra.clear();

  const Stats sl = stats_of(lat), sc = stats_of(compute), sh = stats_of(h2d_ms), sd = stats_of(d2h_ms),
              sw = stats_of(wall);
  const std::string streams = a.streams > 1 ? ", " + std::to_string(a.streams) + " streams" : "";
  std::printf("batch %d (%s%s%s): throughput %.1f images/s (%.1f queries/s)\n", batch, e.device_name().c_str(),
              a.cuda_graph ? ", CUDA graph" : "", streams.c_str(), ips, ips / batch);
  print_stats("latency", sl);
  print_stats("GPU compute", sc);
  print_stats("host-to-device", sh);
  print_stats("device-to-host", sd);
  print_stats("host wall", sw);
  nlohmann::json r = {{"batch", batch},
                      {"streams", a.streams},
                      {"split", split},
                      {"throughput_ips", ips},
                      {"latency_ms", stats_json(sl)},
                      {"gpu_compute_ms", stats_json(sc)},
                      {"h2d_ms", stats_json(sh)},
                      {"d2h_ms", stats_json(sd)},
                      {"host_wall_ms", stats_json(sw)}};
  if (auto mem = ctx->memory_report()) {
    r["activation_arena_bytes"] = mem->arena_bytes;
    r["activation_tensor_bytes"] = mem->activation_bytes;
    r["weight_bytes"] = mem->weight_bytes;
    std::printf("  memory: activations %.1f MiB planned (%.1f MiB without reuse), weights %.1f MiB\n",
                mem->arena_bytes / 1048576.0, mem->activation_bytes / 1048576.0, mem->weight_bytes / 1048576.0);
  }
  if (profile) {
    auto times = QD_TRY(from_public(ctx->profile(std::max(10, a.iterations / 4), s)));
    nlohmann::json lj = nlohmann::json::array();
    double sum = 0;
    for (const auto& t : times) {
      sum += t.ms;
      nlohmann::json j = layer_json(t.layer);
      j["ms"] = t.ms;
      j["tflops"] = t.ms > 0 ? 2 * t.layer.macs / (t.ms * 1e9) : 0.0;
      lj.push_back(std::move(j));
    }
    profile->push_back({{"batch", batch}, {"layers_total_ms", sum}, {"layers", lj}});
  }
  if (timeline) {  // kernel_timeline: a context of its own, its graph captured while CUPTI records (run 0)
    std::unique_ptr<qdeploy::ExecutionContext> tctx;
    auto runs = QD_TRY(from_public(qdeploy::kernel_timeline(
        [&](int i) -> qdeploy::Status {
          if (i == 0) {
            auto c = e.create_context();
            if (!c) return c.status();
            tctx = std::move(*c);
            for (const qdeploy::Status& st : {tctx->use_cuda_graph(a.cuda_graph), tctx->set_input_shapes(shapes),
                                              tctx->upload(host_feeds, s)}) {
              if (!st) return st;
            }
            for (int w = 0; w < 3; ++w) {
              if (qdeploy::Status st = tctx->enqueue(s); !st) return st;
            }
          } else if (qdeploy::Status st = tctx->enqueue(s); !st) {
            return st;
          }
          return stream.synchronize();
        },
        4)));
    nlohmann::json rj = nlohmann::json::array();
    for (size_t i = 1; i < runs.size(); ++i) rj.push_back(timeline_json(runs[i]));
    const nlohmann::json& last = rj.back();
    std::printf("  timeline: %zu kernels in %.4f ms, the GPU busy %.4f ms (idle %.4f), kernel time %.4f ms\n",
                last["kernels"].size(), last["wall_ms"].get<double>(), last["busy_ms"].get<double>(),
                last["wall_ms"].get<double>() - last["busy_ms"].get<double>(), last["kernel_ms"].get<double>());
    timeline->push_back({{"batch", batch}, {"runs", rj}});
  }
  if (layers) {
    auto info = QD_TRY(from_public(e.layer_info(shapes)));
    nlohmann::json lj = nlohmann::json::array();
    for (const auto& l : info) lj.push_back(layer_json(l));
    layers->push_back({{"batch", batch}, {"layers", lj}});
  }
  return r;
}

Status bench(const BenchArgs& a) {
  if (a.iterations < 1 || a.warmup < 0) return invalid("--iterations must be >= 1 and --warmup >= 0");
  if (a.streams < 1 || a.streams > 16) return invalid("--streams must be in 1..16");
  std::shared_ptr<Engine> engine = QD_TRY(build_from_flags(a.model, a.flags));
  const qdeploy::Engine api(engine);  // the same engine through the public API: contexts, streams, profiles
  std::printf("engine: %s\n", engine->describe().c_str());
  const bool dynamic = !engine->inputs().empty() && !engine->inputs()[0].shape.empty() &&
                       engine->inputs()[0].shape[0] < 0;
  std::vector<int> batches = a.batches;
  if (batches.empty()) batches.push_back(1);
  nlohmann::json results = nlohmann::json::array(), profile = nlohmann::json::array(),
                 layers = nlohmann::json::array(), timeline = nlohmann::json::array();
  for (int b : batches) {
    if (b < 1) return invalid("--batch values must be >= 1");
    if (!dynamic && !engine->inputs().empty() && !engine->inputs()[0].shape.empty() &&
        engine->inputs()[0].shape[0] != b) {
      return invalid("the model's batch is fixed at " + std::to_string(engine->inputs()[0].shape[0]) +
                     "; --batch " + std::to_string(b) + " needs a model with a dynamic batch dim (export it so)");
    }
    nlohmann::json r;
    if (api.device() == qdeploy::Device::kCuda) {
      r = QD_TRY(bench_device(api, *engine, a, b, a.profile_path.empty() ? nullptr : &profile,
                              a.layer_info_path.empty() ? nullptr : &layers,
                              a.timeline_path.empty() ? nullptr : &timeline));
    } else {
      if (a.streams > 1) return invalid("--streams needs a CUDA engine (--device cuda)");
      r = QD_TRY(bench_host(*engine, a, b));
    }
    results.push_back(r);
  }
  nlohmann::json doc = {{"model", a.model}, {"engine", engine->describe()}, {"cuda_graph", a.cuda_graph},
                        {"warmup", a.warmup}, {"iterations", a.iterations}, {"results", results}};
  if (!a.profile_path.empty()) {
    if (profile.empty()) return invalid("--export-profile needs a CUDA engine (--device cuda)");
    QD_RETURN_IF_ERROR(write_file_atomic(a.profile_path, profile.dump(1)));
  }
  if (!a.layer_info_path.empty()) {
    if (layers.empty()) return invalid("--export-layer-info needs a CUDA engine (--device cuda)");
    QD_RETURN_IF_ERROR(write_file_atomic(a.layer_info_path, layers.dump(1)));
  }
  if (!a.timeline_path.empty()) {
    if (timeline.empty()) return invalid("--export-timeline needs a CUDA engine (--device cuda)");
    QD_RETURN_IF_ERROR(write_file_atomic(a.timeline_path, timeline.dump(1)));
  }
  if (!a.json_path.empty()) QD_RETURN_IF_ERROR(write_file_atomic(a.json_path, doc.dump(1)));
  return Status::ok();
}

}  // namespace

RunFn add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Measure latency and throughput of a model or plan (trtexec-style)");
  sub->add_option("model", a->model, "ONNX model or plan")->required();
  add_build_flags(sub, a->flags);
  sub->add_option("--batch", a->batches, "Batch sizes (comma-separated)")->delimiter(',');
  sub->add_option("--warmup", a->warmup, "Warm-up iterations per batch size")->capture_default_str();
  sub->add_option("--iterations", a->iterations, "Timed iterations per batch size")->capture_default_str();
  sub->add_flag("--cuda-graph", a->cuda_graph, "Replay the model as one captured CUDA graph");
  sub->add_option("--streams", a->streams,
                  "Throughput from this many contexts enqueueing concurrently, each on its own stream (GPU)")
      ->capture_default_str();
  sub->add_option("--export-profile", a->profile_path, "Per-layer times (JSON)");
  sub->add_option("--export-layer-info", a->layer_info_path, "Per-layer kernels, precisions and formats (JSON)");
  sub->add_option("--export-timeline", a->timeline_path,
                  "Kernel start and end times of three runs, from CUPTI (JSON; GPU, needs libcupti)");
  sub->add_option("--json", a->json_path, "Write the summary as JSON");
  return [a] { return report(bench(*a)); };
}

}  // namespace qd::cli
