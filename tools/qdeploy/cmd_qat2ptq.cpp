// qdeploy qat2ptq MODEL_QAT.onnx -o DIR [--cache-header TRT-8600-EntropyCalibration2] [--unit-scale-for-add]
// A QAT model (Q/DQ) -> the model without Q/DQ plus its INT8 scales, for engines that take implicit quantization
// (TensorRT on DLA, or qdeploy's --calib-cache / --precision-config). The rules are in src/quant/qat2ptq.h.
#include <cstdio>

#include "build_flags.h"
#include "commands.h"
#include "onnx/importer.h"
#include "quant/qat2ptq.h"

namespace qd::cli {

namespace {

struct Qat2PtqArgs {
  std::string model;
  std::string out;
  std::string header;
  bool unit_scale_for_add = false;
  bool verbose = false;
};

int run_qat2ptq(const Qat2PtqArgs& a) {
  CalibCache header;
  if (!a.header.empty()) {
    if (Status s = parse_cache_header(a.header, &header); !s.is_ok()) return report(s.prefix("--cache-header"));
  }
  auto g = import_onnx_file(a.model);
  if (!g) return report(g.status());
  // Invalid nodes are an error here as in every command (qat_to_ptq only folds what it can and would write them out).
  Graph checked = *g;
  Status prepared;
  if (Status s = prepare_unless_open(checked, {}, a.model, &prepared); !s.is_ok()) return report(s);
  Qat2PtqOptions opt;
  opt.unit_scale_for_add = a.unit_scale_for_add;
  auto r = qat_to_ptq(std::move(*g), opt);
  if (!r) return report(Status(r.status()).prefix(a.model));
  if (Status s = write_qat2ptq(*r, a.out, header); !s.is_ok()) return report(s);

  int from_qdq = 0;
  for (const auto& s : r->scales) from_qdq += s.rule == "Q/DQ";
  std::printf("%s: removed %d Q/DQ pairs; %zu tensor scales (%d from Q/DQ, %zu inferred); %zu weights with QAT "
              "scales\n", a.model.c_str(), r->pairs, r->scales.size(), from_qdq, r->scales.size() - from_qdq,
              r->weight_scales.size());
  if (a.verbose) {
    for (const auto& s : r->scales) {
      if (s.rule != "Q/DQ") std::printf("  inferred %-60s %.6g  (%s)\n", s.tensor.c_str(), s.scale, s.rule.c_str());
    }
  }
  if (!r->unscaled.empty()) {
    std::printf("%zu tensors have no scale; their consumers are listed as fp16_nodes (%zu nodes):\n",
                r->unscaled.size(), r->fp16_nodes.size());
    for (const auto& t : r->unscaled) std::printf("  %s\n", t.c_str());
  }
  std::printf("wrote %s/model.onnx, model.cache, model.json, model.layer_precisions.txt\n", a.out.c_str());
  return 0;
}

}  // namespace

RunFn add_qat2ptq(CLI::App& app) {
  auto a = std::make_shared<Qat2PtqArgs>();
  auto* sub = app.add_subcommand("qat2ptq", "Convert a QAT model (Q/DQ) to a float model plus INT8 scales "
                                            "(calibration cache, precision config, layer precisions)");
  sub->add_option("model", a->model, "ONNX model with QuantizeLinear/DequantizeLinear nodes")->required();
  sub->add_option("-o,--out", a->out, "Output folder (created if missing)")->required();
  sub->add_option("--cache-header", a->header, "Calibration cache header, e.g. TRT-8601-EntropyCalibration2 "
                                               "(default TRT-8600-EntropyCalibration2)");
  sub->add_flag("--unit-scale-for-add", a->unit_scale_for_add,
                "Give a Conv output read only by an Add scale 1 (DLA's Conv+Add fusion; qdq-translator's "
                "--add_unary_ew_scales_for_dla)");
  sub->add_flag("-v,--verbose", a->verbose, "List every inferred scale and the rule that gave it");
  return [a] { return run_qat2ptq(*a); };
}

}  // namespace qd::cli
