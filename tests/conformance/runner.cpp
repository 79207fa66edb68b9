// Runs the ONNX backend node tests (model.onnx + test_data_set_*/{input,output}_N.pb) on the reference backend (the
// default) or, with --device cuda, through qd::build_engine + Engine::run (fp32 plans), and reports passed / failed /
// unsupported, with the reason for every test that does not pass.
// A test is "unsupported" when qdeploy says so (an op, attribute value or element type it does not support);
// anything else that does not match is a failure. Exit code 1 when any test fails, or when a test named in the
// --expect-pass file (one name a line) does not pass: it guards what passed when the docs were made.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>

#include <unistd.h>

#include "core/file_io.h"
#include "onnx.pb.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "ops/interpret.h"
#include "passes/passes.h"
#include "runtime/engine.h"

namespace fs = std::filesystem;
using namespace qd;

namespace {

// ONNX Runtime's fp32 backend-test tolerances: |actual - expected| <= atol + rtol * |expected|.
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-5;

enum class Outcome { kPass, kFail, kUnsupported };

// --device cuda: the engine options (shapes are filled per test from its input .pb files); empty device = reference.
struct EngineMode {
  std::string device;  // "" (reference backend) or cuda / cpu
  std::string precision = "fp32";
};
EngineMode g_mode;
struct Result {
  std::string name;
  Outcome outcome;
  std::string reason;
};

Expected<Tensor> load_pb(const std::string& path, std::string* name) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.status();
  onnx::TensorProto p;
  if (!p.ParseFromString(*bytes)) return invalid(path + ": not a TensorProto (sequence/optional inputs are unsupported)");
  *name = p.name();
  return tensor_from_proto(p, "");
}

std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) return std::string("dtype ") + dtype_name(got.dtype()) + ", expected " + dtype_name(want.dtype());
  if (got.shape() != want.shape()) return "shape " + shape_str(got.shape()) + ", expected " + shape_str(want.shape());
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double a = got.get_f64(i), b = want.get_f64(i);
    bool ok;
    if (std::isnan(b)) ok = std::isnan(a);
    else if (std::isinf(b)) ok = a == b;
    else if (is_float(want.dtype())) ok = std::fabs(a - b) <= kAtol + kRtol * std::fabs(b);
    else ok = got.get_i64(i) == want.get_i64(i);
    if (!ok) {
      ++bad;
      if (first < 0) first = i;
      if (!std::isnan(a - b)) worst = std::max(worst, std::fabs(a - b));
    }
  }
  if (!bad) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%lld of %lld elements differ (first at %lld: %g vs %g; max abs diff %g)",
                (long long)bad, (long long)got.numel(), (long long)first, got.get_f64(first), want.get_f64(first), worst);
  return buf;
}

// Node tests feed shape-setting operands (Resize's scales and sizes, Reduce axes, Pad's pads, TopK's k, ...) as graph
// inputs, which qdeploy requires to be constants (it fixes every shape at build time). A test refused for that alone
// runs again with every input but the first turned into an initializer holding that data set's value, as an exported
// model stores them. Returns the folder of such a copy of the test (one data set), or "" when it cannot be made.
std::string frozen_copy(const fs::path& dir, const fs::path& set, const fs::path& tmp) {
  auto bytes = read_file((dir / "model.onnx").string());
  onnx::ModelProto m;
  if (!bytes || !m.ParseFromString(*bytes) || m.graph().input_size() < 2) return "";
  const fs::path out = tmp / (dir.filename().string() + "_" + set.filename().string());
  fs::create_directories(out / "test_data_set_0");
  auto* g = m.mutable_graph();
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (int i = 0; i < g->input_size(); ++i) {
    const fs::path pb = set / ("input_" + std::to_string(i) + ".pb");
    if (i == 0) {
      *kept.Add() = g->input(i);
      fs::copy_file(pb, out / "test_data_set_0" / "input_0.pb", fs::copy_options::overwrite_existing);
      continue;
    }
    auto t = read_file(pb.string());
    onnx::TensorProto tp;
    if (!t || !tp.ParseFromString(*t)) return "";
    tp.set_name(g->input(i).name());
    *g->add_initializer() = tp;
  }
  *g->mutable_input() = kept;
  for (const auto& e : fs::directory_iterator(set)) {
    if (e.path().filename().string().rfind("output_", 0) == 0) {
      fs::copy_file(e.path(), out / "test_data_set_0" / e.path().filename(), fs::copy_options::overwrite_existing);
    }
  }
  if (!write_file_atomic((out / "model.onnx").string(), m.SerializeAsString()).is_ok()) return "";
  return out.string();
}

Result run_test_once(const fs::path& dir);

Result run_test(const fs::path& dir) {
  Result r = run_test_once(dir);
  const bool shape_inputs = r.outcome == Outcome::kUnsupported &&
                            (r.reason.find("must be a constant") != std::string::npos ||
                             r.reason.find("must be constants") != std::string::npos ||
                             r.reason.find("depends on runtime data") != std::string::npos);
  if (!shape_inputs) return r;
  const fs::path tmp = fs::temp_directory_path() / ("qd-conformance-" + std::to_string(::getpid()));
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  Result frozen{r.name, Outcome::kPass, "inputs 1.. given as constants"};
  for (const auto& set : sets) {
    const std::string copy = frozen_copy(dir, set, tmp);
    if (copy.empty()) return r;
    Result once = run_test_once(copy);
    if (once.outcome != Outcome::kPass) {
      frozen = once;
      frozen.name = r.name;
      frozen.reason = "(inputs 1.. given as constants) " + once.reason;
      break;
    }
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return frozen;
}

Result run_test_once(const fs::path& dir) {
  Result r{dir.filename().string(), Outcome::kPass, ""};
  auto classify = [&](const Status& s, const std::string& stage) {
    r.outcome = s.code() == StatusCode::kUnsupported ? Outcome::kUnsupported : Outcome::kFail;
    r.reason = stage + ": " + s.to_string();
    return r;
  };
  auto g0 = import_onnx_file((dir / "model.onnx").string());
  if (!g0) return classify(g0.status(), "import");
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return classify(invalid("no test_data_set_*"), "data");
  // Engine mode: one engine per distinct set of input shapes (test data sets usually share them).
  std::map<std::map<std::string, Shape>, std::unique_ptr<Engine>> engines;
  for (const auto& set : sets) {
    Graph g = *g0;
    std::map<std::string, Tensor> feeds;
    std::map<std::string, Shape> shapes;
    for (size_t i = 0; g.inputs.size() > i; ++i) {
      const fs::path p = set / ("input_" + std::to_string(i) + ".pb");
      std::string name;
      auto t = load_pb(p.string(), &name);
      if (!t) return classify(t.status(), "input");
      if (name.empty()) name = g.values[g.inputs[i]].name;
      feeds[name] = *t;
      shapes[name] = t->shape();
    }
    Expected<std::vector<Tensor>> outs = std::vector<Tensor>{};
    if (g_mode.device.empty()) {
      PrepareOptions opt;
      opt.input_shapes = shapes;
      Status st = prepare_graph(g, opt);
      if (!st.is_ok()) return classify(st, "prepare");
      outs = run_reference(g, feeds);
    } else {
      auto& engine = engines[shapes];
      if (!engine) {
        BuildOptions bo;
        bo.device = g_mode.device;
        bo.precision = *parse_precision(g_mode.precision);  // checked in main()
        bo.shapes = shapes;
        auto e = build_engine((dir / "model.onnx").string(), bo);
        if (!e) return classify(e.status(), "build");
        engine = std::move(*e);
      }
      outs = engine->run(feeds);
    }
    if (!outs) return classify(outs.status(), "run");
    for (size_t i = 0; i < outs->size(); ++i) {
      std::string name;
      auto want = load_pb((set / ("output_" + std::to_string(i) + ".pb")).string(), &name);
      if (!want) return classify(want.status(), "expected output");
      const std::string diff = compare((*outs)[i], *want);
      if (!diff.empty()) {
        r.outcome = Outcome::kFail;
        r.reason = set.filename().string() + " output " + std::to_string(i) + ": " + diff;
        return r;
      }
    }
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s NODE_TEST_DIR [--filter REGEX] [--report FILE.md] [--suite NAME] [--verbose] [--expect-pass FILE] "
                 "[--device cuda|cpu [--precision fp32]]\n(default: the reference backend on the IR; --device builds each test with "
                 "qd::build_engine and runs it through the Engine)\n",
                 argv[0]);
    return 2;
  }
  std::string filter = ".*", report_path;
  bool verbose = false;
  std::string expect_path, suite = "the ONNX backend node tests";
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--report" && i + 1 < argc) report_path = argv[++i];
    else if (a == "--verbose") verbose = true;
    else if (a == "--expect-pass" && i + 1 < argc) expect_path = argv[++i];
    else if (a == "--suite" && i + 1 < argc) suite = argv[++i];
    else if (a == "--device" && i + 1 < argc) g_mode.device = argv[++i];
    else if (a == "--precision" && i + 1 < argc) g_mode.precision = argv[++i];
    else {
      std::fprintf(stderr, "unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (!g_mode.device.empty()) {
    BuildOptions bo;
    bo.device = g_mode.device;
    auto precision = parse_precision(g_mode.precision);
    if (!precision) {
      std::fprintf(stderr, "error: %s\n", precision.status().to_string().c_str());
      return 2;
    }
    bo.precision = *precision;
    if (Status s = check_build_options(bo); !s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
      return 2;
    }
    if (*precision != Precision::kFp32) {
      std::fprintf(stderr, "error: --precision %s: the node tests are checked with fp32 tolerances; use --precision fp32\n",
                   g_mode.precision.c_str());
      return 2;
    }
  }
  const std::string mode_name = g_mode.device.empty() ? "reference backend" : g_mode.device + " engine, " + g_mode.precision;
  const fs::path root(argv[1]);
  if (!fs::is_directory(root)) {
    std::fprintf(stderr, "error: '%s' is not a directory; install Debian's libonnx-testdata (scripts/setup.sh)\n", argv[1]);
    return 2;
  }
  std::vector<fs::path> dirs;
  const std::regex re(filter);
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory() && std::regex_search(e.path().filename().string(), re)) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::vector<Result> results;
  int pass = 0, fail = 0, unsup = 0;
  for (const auto& d : dirs) {
    results.push_back(run_test(d));
    const Result& r = results.back();
    // No GPU: every test would come back unsupported for the same reason; say so once and stop.
    if (g_mode.device == "cuda" && r.outcome == Outcome::kUnsupported &&
        r.reason.find("no CUDA device") != std::string::npos) {
      std::fprintf(stderr, "error: --device cuda needs a GPU: %s\n", r.reason.c_str());
      return 2;
    }
    if (r.outcome == Outcome::kPass) ++pass;
    else if (r.outcome == Outcome::kFail) ++fail;
    else ++unsup;
    if (r.outcome == Outcome::kFail || verbose) {
      std::printf("%-11s %s: %s\n", r.outcome == Outcome::kFail ? "FAILED" : r.outcome == Outcome::kPass ? "passed" : "unsupported",
                  r.name.c_str(), r.reason.c_str());
    }
  }
  if (!report_path.empty()) {
    std::string md = "# ONNX node conformance: " + suite + " (" + mode_name + ")\n\n";
    md += "Tolerance: |got - expected| <= 1e-5 + 1e-3 * |expected| for floats; exact for integers and bools.\n\n";
    if (g_mode.device.empty()) {
      md += "Generated by scripts/gen-docs.sh (`qdeploy_conformance NODE_DIR --suite \"" + suite + "\" --report " +
            fs::path(report_path).filename().string() + "`).\n\n";
      md += "**On the GPU.** `qdeploy_conformance NODE_DIR --device cuda --precision fp32` builds every test with "
            "`qd::build_engine` (device cuda, fp32, input shapes from the test's input .pb files), runs it through the "
            "Engine and checks it with the same tolerances; unsupported means the build or the run returned "
            "kUnsupported (the reason is listed with `--verbose`). Without a GPU it stops with an error. "
            "`scripts/gpu-pack.sh` packs the node tests into .device/ and `scripts/gpu-check.sh OUT conformance` runs "
            "both modes on the GPU machine, writing OUT/conformance-reference.log and OUT/conformance-cuda.log; the "
            "results are in docs/benchmarks.md (with the GPU and date) and in those logs (docs/logs/).\n\n";
    }
    md += std::to_string(pass) + " passed, " + std::to_string(fail) + " failed, " + std::to_string(unsup) + " unsupported\n\n";
    md += "| test | result | reason |\n|---|---|---|\n";
    for (const auto& r : results) {
      std::string reason = r.reason;
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      std::replace(reason.begin(), reason.end(), '|', '/');
      md += "| " + r.name + " | " + (r.outcome == Outcome::kPass ? "pass" : r.outcome == Outcome::kFail ? "FAIL" : "unsupported") +
            " | " + reason + " |\n";
    }
    Status s = write_file_atomic(report_path, md);
    if (!s.is_ok()) std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
  }
  std::printf("conformance%s: %d passed, %d failed, %d unsupported (of %zu ONNX node tests)\n",
              g_mode.device.empty() ? "" : (" (" + mode_name + ")").c_str(), pass, fail, unsup, dirs.size());
  int missing = 0;
  if (!expect_path.empty()) {
    auto text = read_file(expect_path);
    if (!text) {
      std::fprintf(stderr, "error: %s\n", text.status().to_string().c_str());
      return 2;
    }
    std::map<std::string, const Result*> by_name;
    for (const Result& r : results) by_name[r.name] = &r;
    size_t pos = 0;
    while (pos < text->size()) {
      size_t end = text->find('\n', pos);
      if (end == std::string::npos) end = text->size();
      const std::string name = text->substr(pos, end - pos);
      pos = end + 1;
      if (name.empty()) continue;
      auto it = by_name.find(name);
      if (it == by_name.end() || it->second->outcome != Outcome::kPass) {
        ++missing;
        std::printf("NOT PASSED  %s: %s\n", name.c_str(),
                    it == by_name.end() ? "no such test in the suite" : it->second->reason.c_str());
      }
    }
    std::printf("%d of the tests expected to pass did not\n", missing);
  }
  return fail || missing ? 1 : 0;
}
