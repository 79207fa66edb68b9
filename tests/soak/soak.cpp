// The GPU soak (docs/validation.md): many execution contexts of one CUDA engine, driven by several threads on their
// own streams, run the same inputs over and over; every output must equal the single-threaded run's bit for bit, and
// device and host memory must stay flat once warm. Writes the memory curve as CSV and SVG.
//
//   qdeploy_soak MODEL|PLAN [--precision fp32|fp16|int8] [--calib-cache FILE] [--images DIR] [--threads 4]
//                [--contexts 8] [--runs 10000] [--out DIR]
//
// --contexts per thread, --runs per thread (spread over its contexts). With --images, each image is letterboxed by
// the detector (a YOLOv5 model); without, four seeded random inputs of the engine's (static) input shape.
// Exit status: 0 when every output matched and memory stayed flat, 1 when not, 2 for a usage or build error.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "eval/svg_chart.h"
#include "qdeploy/qdeploy.h"

namespace {

struct Args {
  std::string model, precision = "int8", calib_cache, images, out = "soak-out";
  int threads = 4, contexts = 8, runs = 10000;
};

struct Sample {
  double seconds = 0;
  long runs = 0;
  double device_mib = 0, host_mib = 0;
};

int usage(const std::string& why) {
  std::fprintf(stderr,
               "error: %s\nusage: qdeploy_soak MODEL|PLAN [--precision fp32|fp16|int8] [--calib-cache FILE] "
               "[--images DIR] [--threads N] [--contexts N] [--runs N] [--out DIR]\n",
               why.c_str());
  return 2;
}

int fail(const qdeploy::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return 2;
}

double device_used_mib() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
  return static_cast<double>(total - free) / (1 << 20);
}

double host_rss_mib() {
  long pages = 0, resident = 0;
  std::ifstream f("/proc/self/statm");
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

bool same(const std::vector<qdeploy::HostTensor>& a, const std::vector<qdeploy::HostTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape() || a[i].dtype() != b[i].dtype() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].nbytes()) != 0) {
      return false;
    }
  }
  return true;
}

// The inputs: letterboxed images (a detector), or seeded random tensors of the engine's input shape.
qdeploy::Expected<std::vector<qdeploy::HostTensor>> make_inputs(const qdeploy::Engine& engine, const Args& a) {
  std::vector<qdeploy::HostTensor> in;
  if (!a.images.empty()) {
    auto det = qdeploy::Detector::create(engine);
    if (!det) return det.status();
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(a.images)) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      auto image = qdeploy::read_image(f);
      if (!image) continue;  // not an image
      auto batch = det->letterbox({&*image});
      if (!batch) return batch.status();
      in.push_back(batch->tensor);
    }
    if (in.empty()) return qdeploy::Status(qdeploy::StatusCode::kInvalidArgument, "no JPEG or PNG in " + a.images);
    return in;
  }
  const qdeploy::TensorInfo& info = engine.inputs()[0];
  qdeploy::Dims shape = info.shape;
  for (int64_t& d : shape) d = d < 0 ? 1 : d;  // a dynamic dim: 1
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int k = 0; k < 4; ++k) {
    qdeploy::HostTensor t(qdeploy::DataType::kFloat32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = u(rng);
    in.push_back(std::move(t));
  }
  return in;
}

void write_results(const Args& a, const std::vector<Sample>& samples) {
  std::filesystem::create_directories(a.out);
  std::ofstream csv(a.out + "/soak.csv");
  csv << "seconds,runs,device_mib,host_rss_mib\n";
  qd::LineChart chart;
  chart.title = "qdeploy_soak: memory in use over the runs";
  chart.x_label = "runs (all threads)";
  chart.y_label = "MiB";
  chart.series = {{"device memory in use (cudaMemGetInfo)", {}, {}}, {"host resident set", {}, {}}};
  for (const Sample& s : samples) {
    csv << s.seconds << "," << s.runs << "," << s.device_mib << "," << s.host_mib << "\n";
    chart.series[0].x.push_back(static_cast<double>(s.runs));
    chart.series[0].y.push_back(s.device_mib);
    chart.series[1].x.push_back(static_cast<double>(s.runs));
    chart.series[1].y.push_back(s.host_mib);
  }
  std::ofstream(a.out + "/soak.svg") << qd::svg_line_chart(chart);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = s.rfind("--", 0) == 0 ? value() : nullptr;
    if (s.rfind("--", 0) != 0) {
      if (!a.model.empty()) return usage("one model or plan, not two ('" + s + "')");
      a.model = s;
    } else if (!v) {
      return usage(s + " needs a value");
    } else if (s == "--precision") {
      a.precision = v;
    } else if (s == "--calib-cache") {
      a.calib_cache = v;
    } else if (s == "--images") {
      a.images = v;
    } else if (s == "--out") {
      a.out = v;
    } else if (s == "--threads" || s == "--contexts" || s == "--runs") {
      const int n = std::atoi(v);
      if (n <= 0) return usage(s + " takes a positive number, not '" + v + "'");
      (s == "--threads" ? a.threads : s == "--contexts" ? a.contexts : a.runs) = n;
    } else {
      return usage("unknown option " + s);
    }
  }
  if (a.model.empty()) return usage("no model or plan given");
  qdeploy::BuildOptions opt;
  opt.device = qdeploy::Device::kCuda;
  opt.precision = a.precision == "fp32"   ? qdeploy::Precision::kFp32
                  : a.precision == "fp16" ? qdeploy::Precision::kFp16
                                          : qdeploy::Precision::kInt8;
  if (a.precision != "fp32" && a.precision != "fp16" && a.precision != "int8") {
    return usage("--precision " + a.precision + ": use fp32, fp16 or int8");
  }
  opt.calib_cache = a.calib_cache;
  std::printf("building %s ...\n", a.model.c_str());
  auto engine = qdeploy::is_plan(a.model) ? qdeploy::load(a.model) : qdeploy::build(a.model, opt);
  if (!engine) return fail(engine.status());
  auto inputs = make_inputs(*engine, a);
  if (!inputs) return fail(inputs.status());
  for (const qdeploy::HostTensor& x : *inputs) {  // the contexts keep one shape: no rebuild between runs
    if (x.shape() != (*inputs)[0].shape()) return usage("the inputs differ in shape; give images of one size");
  }
  const std::string input = engine->inputs()[0].name;

  // The single-threaded reference: one context, each input once.
  std::vector<std::vector<qdeploy::HostTensor>> ref;
  {
    auto ctx = engine->create_context();
    if (!ctx) return fail(ctx.status());
    for (const qdeploy::HostTensor& x : *inputs) {
      qdeploy::Status s = (*ctx)->set_input_shapes({{input, x.shape()}});
      if (s) s = (*ctx)->upload({{input, x}}, nullptr);
      if (s) s = (*ctx)->enqueue(nullptr);
      if (!s) return fail(s);
      auto out = (*ctx)->download(nullptr);
      if (!out) return fail(out.status());
      ref.push_back(std::move(*out));
    }
  }
  std::printf("%s: %d threads x %d contexts, %d runs per thread over %zu inputs\n", engine->describe().c_str(),
              a.threads, a.contexts, a.runs, inputs->size());

  std::atomic<long> done{0}, mismatches{0};
  std::atomic<bool> stop{false};
  std::mutex err_mu;
  std::string first_error;
  auto worker = [&](int t) {
    std::vector<std::unique_ptr<qdeploy::ExecutionContext>> ctxs;
    std::vector<cudaStream_t> streams(static_cast<size_t>(a.contexts));
    auto error = [&](const std::string& m) {
      std::lock_guard<std::mutex> lock(err_mu);
      if (first_error.empty()) first_error = "thread " + std::to_string(t) + ": " + m;
      stop = true;
    };
    for (int c = 0; c < a.contexts; ++c) {
      auto ctx = engine->create_context();
      if (!ctx) return error(ctx.status().message());
      if (qdeploy::Status s = (*ctx)->set_input_shapes({{input, (*inputs)[0].shape()}}); !s) return error(s.message());
      if (cudaStreamCreateWithFlags(&streams[c], cudaStreamNonBlocking) != cudaSuccess) return error("no stream");
      ctxs.push_back(std::move(*ctx));
    }
    std::vector<size_t> which(static_cast<size_t>(a.contexts));
    for (long r = 0; r < a.runs && !stop;) {
      const int n = static_cast<int>(std::min<long>(a.contexts, a.runs - r));
      for (int c = 0; c < n; ++c) {  // all contexts in flight, then their results
        which[c] = static_cast<size_t>(t * 7 + r + c) % inputs->size();
        qdeploy::Status s = ctxs[c]->upload({{input, (*inputs)[which[c]]}}, streams[c]);
        if (s) s = ctxs[c]->enqueue(streams[c]);
        if (!s) return error(s.message());
      }
      for (int c = 0; c < n; ++c) {
        auto out = ctxs[c]->download(streams[c]);
        if (!out) return error(out.status().message());
        if (!same(*out, ref[which[c]])) ++mismatches;
        ++done;
      }
      r += n;
    }
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
  };

  std::vector<Sample> samples;
  const auto t0 = std::chrono::steady_clock::now();
  auto sample = [&]() {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    samples.push_back({secs, done.load(), device_used_mib(), host_rss_mib()});
  };
  sample();
  std::vector<std::thread> pool;
  for (int t = 0; t < a.threads; ++t) pool.emplace_back(worker, t);
  const long total = static_cast<long>(a.threads) * a.runs;
  for (long last = -1; done < total && !stop;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    sample();
    if (done * 10 / total != last) {
      last = done * 10 / total;
      std::printf("  %ld / %ld runs, device %.0f MiB, host %.0f MiB\n", done.load(), total, samples.back().device_mib,
                  samples.back().host_mib);
      std::fflush(stdout);
    }
  }
  for (std::thread& th : pool) th.join();
  sample();
  write_results(a, samples);
  if (!first_error.empty()) {
    std::fprintf(stderr, "error: %s\n", first_error.c_str());
    return 1;
  }
  // Flat, over the samples taken while runs were in flight from the first past 10% of the runs on (contexts, graphs
  // and caches made; the last sample, after the threads ended, has their contexts freed): device memory never above
  // that first sample, and host memory (which moves with each thread's output buffers) without a trend: the mean of
  // the last quarter of those samples at most 2% (8 MiB at least) above the mean of the first quarter.
  std::vector<const Sample*> run;
  for (const Sample& s : samples) {
    if (s.runs * 10 >= total && s.runs < total) run.push_back(&s);
  }
  double dev_growth = 0, host_growth = 0;
  if (!run.empty()) {
    for (const Sample* s : run) dev_growth = std::max(dev_growth, s->device_mib - run.front()->device_mib);
    const size_t q = std::max<size_t>(1, run.size() / 4);
    double first = 0, last = 0;
    for (size_t i = 0; i < q; ++i) first += run[i]->host_mib / q, last += run[run.size() - q + i]->host_mib / q;
    host_growth = last - first;
  }
  // Under 4 samples (a run of about a second) there is no curve to judge.
  const bool flat = run.size() >= 4 && dev_growth <= 1.0 && host_growth <= std::max(8.0, 0.02 * run[0]->host_mib);
  const double secs = samples.back().seconds;
  std::printf("%ld runs in %.1f s (%.0f runs/s): %ld outputs differ from the single-threaded run; after warm-up "
              "device memory peak %+.1f MiB, host trend %+.1f MiB (%zu samples): %s\n",
              done.load(), secs, done / std::max(secs, 1e-9), mismatches.load(), dev_growth, host_growth, run.size(),
              mismatches == 0 && flat ? "pass" : "FAIL");
  std::printf("wrote %s/soak.csv and %s/soak.svg\n", a.out.c_str(), a.out.c_str());
  return mismatches == 0 && flat ? 0 : 1;
}
