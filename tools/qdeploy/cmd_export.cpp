// qdeploy export MODEL --target trt10|dla[:VERSION]|trt11 -o DIR [--precision int8 --calib-cache F ...]
// The files TensorRT on the board needs, with the trtexec command line that builds them:
//   trt10, dla: the float ONNX (a QAT model's Q/DQ removed, its scales carried as qat2ptq does), the calibration
//               cache, the layer precisions, and trtexec.sh (dla: --useDLACore, I/O formats from the DLA placement,
//               which is written too);
//   trt11:      a Q/DQ ONNX (explicit quantization, quant/qdq_export.h) whose float layers are cast to FP16
//               (quant/fp16_regions.h; --float-dtype fp32 keeps them float32) and its strongly typed trtexec line.
// Everything is serialized before the first file is written, and each file is written atomically.
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "commands.h"
#include "core/file_io.h"
#include "inspect_dla.h"
#include "onnx/exporter.h"
#include "quant/fp16_regions.h"
#include "quant/qdq_export.h"
#include "trt_model.h"

namespace qd::cli {

namespace {

struct ExportArgs {
  std::string model, target, out;
  std::string float_dtype = "fp16";
  BuildFlags build;
  int dla_core = 0;
};

std::string layer_precisions(const TrtModel& m) {
  std::string out;
  for (const Node& n : m.model.nodes) {
    const bool flt = !m.int8 || m.int8_options.float_node_names.count(n.name);
    out += n.name + (flt ? ":fp16\n" : ":int8\n");
  }
  return out;
}

// One shell word: as it is when it holds only characters the shell leaves alone, else in single quotes.
std::string sh_word(const std::string& w) {
  bool plain = !w.empty();
  for (char c : w) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./:,=+-@%", c));
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// --layerPrecisions for the layers kept in float (the rest follow --int8), and --shapes where an input is dynamic.
std::string common_flags(const TrtModel& m, const BuildFlags& f, bool layer_precisions) {
  std::string s;
  if (layer_precisions && m.int8 && !m.float_nodes.empty()) {
    std::string lp = "--layerPrecisions=";
    for (size_t i = 0; i < m.float_nodes.size(); ++i) lp += (i ? "," : "") + m.float_nodes[i] + ":fp16";
    s += " \\\n  --precisionConstraints=obey " + sh_word(lp);
  }
  std::string shapes;
  for (int v : m.model.inputs) {
    bool dynamic = false;
    for (int64_t d : m.model.values[v].shape) dynamic = dynamic || d < 0;
    if (!dynamic && f.shapes.empty()) continue;
    const Value& p = m.prepared.values[m.prepared.find_value(m.model.values[v].name)];
    shapes += (shapes.empty() ? "" : ",") + p.name + ":" + shape_str(p.shape);
  }
  if (!shapes.empty()) s += " \\\n  " + sh_word("--shapes=" + shapes);
  return s;
}

std::string script(const std::string& what, const std::string& cmd) {
  return "#!/bin/sh\n# " + what + "\n# Run on the board (written by qdeploy export; docs/dla.md); arguments go to trtexec, e.g. --verbose.\n"
         "cd \"$(dirname \"$0\")\" || exit 1\n" + cmd + " \"$@\"\n";
}

int run_export(const ExportArgs& a) {
  std::string dla_version;
  const bool dla = parse_dla_target(a.target, &dla_version);
  if (!dla && a.target != "trt10" && a.target != "trt11") {
    return report(invalid("--target " + a.target + ": use trt10 (TensorRT <= 10, calibration cache), dla[:8.6|10] "
                          "(Orin's DLA through TensorRT <= 10) or trt11 (TensorRT 11, Q/DQ ONNX)"));
  }
  if (a.float_dtype != "fp16" && a.float_dtype != "fp32") {
    return report(invalid("--float-dtype " + a.float_dtype + ": use fp16 or fp32"));
  }
  if (a.target != "trt11" && a.float_dtype != "fp16") {
    return report(
        invalid("--float-dtype applies to --target trt11 (trt10 and dla take --fp16 with --layerPrecisions)"));
  }
  if (a.target == "trt11" && a.build.precision != "int8") {
    return report(invalid("--target trt11 writes a Q/DQ model: add --precision int8 with its scales"));
  }
  if (a.dla_core < 0) return report(invalid("--dla-core must be >= 0 (Orin has DLA cores 0 and 1)"));
  auto m = load_trt_model(a.model, a.build);
  if (!m) return report(m.status());
  const std::string prec_flags = m->int8 ? "--int8 --fp16" : "--fp16";
  std::vector<std::pair<std::string, std::string>> files;
  std::string summary;
  if (a.target == "trt11") {
    QdqExportReport rep;
    auto qdq = insert_qdq(m->model, m->int8_options, &rep);
    if (!qdq) return report(Status(qdq.status()).prefix(a.model));
    Fp16RegionReport fp16;
    if (a.float_dtype == "fp16") {
      const std::set<std::string> int8_layers(rep.int8_nodes.begin(), rep.int8_nodes.end());
      qdq = cast_float_regions_to_fp16(*qdq, int8_layers, &fp16);
      if (!qdq) return report(Status(qdq.status()).prefix(a.model));
    }
    auto bytes = export_onnx_bytes(*qdq);
    if (!bytes) return report(bytes.status());
    files.emplace_back("model_qdq.onnx", *bytes);
    files.emplace_back("trtexec.sh",
                       script(a.float_dtype == "fp16"
                                  ? "TensorRT 11 (strongly typed): INT8 where the model has Q/DQ, float layers in FP16"
                                  : "TensorRT 11 (strongly typed): INT8 where the model has Q/DQ, float layers in FP32",
                              "trtexec --onnx=model_qdq.onnx --stronglyTyped" + common_flags(*m, a.build, false) +
                                  " \\\n  --saveEngine=model.engine"));
    char buf[300];
    std::snprintf(buf, sizeof buf, "%zu INT8 layers: %d activation and %d weight quantizers", rep.int8_nodes.size(),
                  rep.activation_quantizers, rep.weight_quantizers);
    summary = buf;
    if (a.float_dtype == "fp16") {
      std::snprintf(buf, sizeof buf, "\n%d float nodes in FP16: %d casts to FP16, %d back to FP32 (I/O stays float32)",
                    fp16.fp16_nodes, fp16.casts_to_fp16, fp16.casts_to_fp32);
    } else {
      std::snprintf(buf, sizeof buf, "\nfloat nodes in FP32 (--float-dtype fp32)");
    }
    summary += buf;
  } else {
    auto onnx = export_onnx_bytes(m->model);
    if (!onnx) return report(onnx.status());
    files.emplace_back("model.onnx", *onnx);
    std::string cmd = "trtexec --onnx=model.onnx";
    if (dla) {
      auto profile = dla_profile(dla_version);
      if (!profile) return report(Status(profile.status()).prefix("--target"));
      const DlaPlacement p = place_on_dla(m->prepared, DlaTarget(*profile), dla_options(*m));
      cmd += " --useDLACore=" + std::to_string(a.dla_core);
      if (p.dla_nodes() < static_cast<int>(p.nodes.size())) cmd += " --allowGPUFallback";
      cmd += " \\\n  " + prec_flags + (m->int8 ? " --calib=model.cache" : "") + " \\\n  " + p.trtexec_io_flags();
      files.emplace_back("placement.json", dla_placement_json(p) + "\n");
      files.emplace_back("placement.txt", format_dla_placement(p, true));
      char buf[200];
      std::snprintf(buf, sizeof buf, "%d of %zu nodes on DLA in %d DLA subgraph%s (limit %d)", p.dla_nodes(),
                    p.nodes.size(), p.dla_subgraphs, p.dla_subgraphs == 1 ? "" : "s", p.dla_subgraph_limit);
      summary = buf;
    } else {
      cmd += " \\\n  " + prec_flags + (m->int8 ? " --calib=model.cache" : "");
    }
    cmd += common_flags(*m, a.build, true) + " \\\n  --saveEngine=" + (dla ? "model.dla.engine" : "model.engine");
    if (m->int8) files.emplace_back("model.cache", format_calib_cache(m->cache));
    files.emplace_back("model.layer_precisions.txt", layer_precisions(*m));
    files.emplace_back("trtexec.sh", script(dla ? "Orin DLA through TensorRT <= 10 (implicit INT8: the cache)"
                                                : "TensorRT <= 10 (implicit INT8: the calibration cache)",
                                            cmd));
  }
  if (Status s = make_dirs(a.out); !s.is_ok()) return report(s);
  for (const auto& [name, bytes] : files) {
    if (Status s = write_file_atomic((std::filesystem::path(a.out) / name).string(), bytes); !s.is_ok()) {
      return report(s);
    }
  }
  std::printf("%s for %s:", a.model.c_str(), a.target.c_str());
  for (const auto& f : files) std::printf(" %s", f.first.c_str());
  std::printf(" in %s\n", a.out.c_str());
  if (!summary.empty()) std::printf("%s\n", summary.c_str());
  if (m->int8) {
    std::printf("%zu tensor scales, %zu layers kept in fp16\n", m->cache.scales.size(), m->float_nodes.size());
  }
  return 0;
}

}  // namespace

RunFn add_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* sub = app.add_subcommand("export", "Write what TensorRT needs on the board: float ONNX + calibration cache + "
                                           "layer precisions + trtexec line (trt10, dla), or a Q/DQ ONNX (trt11)");
  sub->add_option("model", a->model, "ONNX model (float, or QAT with Q/DQ)")->required();
  sub->add_option("--target", a->target, "trt10, dla[:8.6|10] or trt11")->required();
  sub->add_option("-o,--out", a->out, "Output folder (created if missing)")->required();
  sub->add_option("--float-dtype", a->float_dtype,
                  "trt11: the type of the layers left in float (not quantized): fp16 (casts around them, graph I/O "
                  "kept float32) or fp32")
      ->capture_default_str();
  sub->add_option("--dla-core", a->dla_core, "dla: the DLA core trtexec builds for (--useDLACore)")->capture_default_str();
  add_build_flags(sub, a->build);
  return [a] { return run_export(*a); };
}

}  // namespace qd::cli
