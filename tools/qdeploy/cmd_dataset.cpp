// qdeploy dataset: makes the data sets the project tests and benchmarks with.
//   dataset fmnist-det  --split train|val --count N --seed S --out DIR   (COCO-format detection scenes)
//   dataset fmnist-cls  --split train|test --out DIR [--format png|npy]  (Fashion-MNIST as 32x32 RGB)
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "tasks/fmnist.h"
#include "tasks/fmnist_det.h"

namespace qd::cli {

RunFn add_dataset(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("dataset", "Generate data sets: fmnist-det (detection), fmnist-cls (classification)");
  cmd->require_subcommand(1);

  struct DetArgs {
    std::string split, out, fmnist_dir = kFmnistDefaultDir;
    int count = 1000, threads = 0, source_limit = 0;
    uint64_t seed = 0;
    bool stats = false, yolo = false, quiet = false;
  };
  auto det = std::make_shared<DetArgs>();
  CLI::App* det_cmd = cmd->add_subcommand(
      "fmnist-det", "FMNIST-Det: 640x640 JPEG scenes of Fashion-MNIST items with COCO annotations "
                    "(the fixed validation set: --split val --count 1000 --seed 0)");
  det_cmd->add_option("--split", det->split, "train (items from Fashion-MNIST train) or val (items from t10k)")
      ->required()
      ->check(CLI::IsMember({"train", "val"}));
  det_cmd->add_option("--count", det->count, "Number of images (default 1000)")->check(CLI::Range(1, 10000000));
  det_cmd->add_option("--seed", det->seed, "Seed; the same seed gives byte-identical files (default 0)");
  det_cmd->add_option("--out", det->out, "Output folder: images/, annotations/instances_<split>.json")->required();
  det_cmd->add_option("--fmnist-dir", det->fmnist_dir, "Folder with the Fashion-MNIST IDX files")
      ->capture_default_str();
  det_cmd->add_option("--threads", det->threads, "Worker threads (default: all cores; output does not depend on it)");
  det_cmd->add_option("--source-limit", det->source_limit,
                      "Draw items only from the first N images of the Fashion-MNIST split (0: all)")
      ->check(CLI::NonNegativeNumber);
  det_cmd->add_flag("--stats", det->stats, "Print statistics (objects per image, COCO area ranges, classes)");
  det_cmd->add_flag("--yolo-labels", det->yolo, "Also write labels/NNNNNN.txt in YOLO format (class cx cy w h)");
  det_cmd->add_flag("--quiet", det->quiet, "No progress output");

  struct ClsArgs {
    std::string split, out, format = "png", fmnist_dir = kFmnistDefaultDir;
    int threads = 0;
    bool quiet = false;
  };
  auto cls = std::make_shared<ClsArgs>();
  CLI::App* cls_cmd = cmd->add_subcommand(
      "fmnist-cls", "Fashion-MNIST as 32x32 3-channel images (28x28 padded with zeros, gray replicated)");
  cls_cmd->add_option("--split", cls->split, "train or test")->required()->check(CLI::IsMember({"train", "test"}));
  cls_cmd->add_option("--out", cls->out, "Output folder")->required();
  cls_cmd->add_option("--format", cls->format,
                      "png: DIR/<label>_<name>/NNNNN.png; npy: DIR/images.npy [N,3,32,32] uint8 + DIR/labels.npy")
      ->check(CLI::IsMember({"png", "npy"}))
      ->capture_default_str();
  cls_cmd->add_option("--fmnist-dir", cls->fmnist_dir, "Folder with the Fashion-MNIST IDX files")
      ->capture_default_str();
  cls_cmd->add_option("--threads", cls->threads, "Worker threads (default: all cores)");
  cls_cmd->add_flag("--quiet", cls->quiet, "No progress output");

  return [det, cls, det_cmd, cls_cmd]() -> int {
    const auto start = std::chrono::steady_clock::now();
    auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    if (det_cmd->parsed()) {
      auto ds = load_fmnist(det->fmnist_dir, det->split == "train" ? "train" : "test");
      if (!ds) return report(ds.status());
      if (det->source_limit > 0 && det->source_limit < ds->count) {
        ds->count = det->source_limit;
        ds->images.resize(static_cast<size_t>(ds->count) * ds->rows * ds->cols);
        ds->labels.resize(static_cast<size_t>(ds->count));
      }
      FmnistDetGenerateOptions opt;
      opt.split = det->split;
      opt.count = det->count;
      opt.seed = det->seed;
      opt.out_dir = det->out;
      opt.threads = det->threads;
      opt.progress = !det->quiet;
      opt.yolo_labels = det->yolo;
      FmnistDetStats stats;
      Status s = generate_fmnist_det(*ds, opt, &stats);
      if (!s.is_ok()) return report(s);
      std::printf("wrote %d images with %d objects to %s (annotations/instances_%s.json) in %.1f s\n", stats.images,
                  stats.objects, det->out.c_str(), det->split.c_str(), seconds());
      if (det->stats) std::printf("\n%s", format_stats(stats).c_str());
      return 0;
    }
    if (cls_cmd->parsed()) {
      auto ds = load_fmnist(cls->fmnist_dir, cls->split);
      if (!ds) return report(ds.status());
      Status s = export_fmnist_classification(*ds, cls->out, cls->format, cls->threads, !cls->quiet);
      if (!s.is_ok()) return report(s);
      std::printf("wrote %d %s images (%s) to %s in %.1f s\n", ds->count, cls->split.c_str(), cls->format.c_str(),
                  cls->out.c_str(), seconds());
      return 0;
    }
    return 2;
  };
}

}  // namespace qd::cli
