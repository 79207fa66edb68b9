// FMNIST-Det: a deterministic synthetic object-detection data set built from Fashion-MNIST glyphs.
//
// Each scene is a 640x640 RGB image on a procedural background (gradients, value noise, stripes, checkerboards,
// blurred blobs) with 1..12 colour-tinted Fashion-MNIST items, alpha-composited with the glyph intensity (x1.5,
// clamped) as alpha,
// sized from ~16 to ~400 pixels so that COCO's small / medium / large ranges all occur. Later items cover earlier
// ones; an item is kept only if at least 40% of its glyph stays visible. Boxes are the tight boxes of the visible
// glyph pixels. Output is COCO: DIR/images/NNNNNN.jpg + DIR/annotations/instances_<split>.json. See docs/dataset.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tasks/fmnist.h"
#include "tasks/image_io.h"

namespace qd {

// splitmix64: the only random source of the generator (std:: distributions differ between standard libraries).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.f / 16777216.f); }  // [0, 1), 24 bits
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  int range(int lo, int hi) {  // [lo, hi], inclusive
    return lo + static_cast<int>(((next() >> 32) * static_cast<uint64_t>(hi - lo + 1)) >> 32);
  }
  bool chance(float p) { return uniform() < p; }

 private:
  uint64_t state_;
};

struct FmnistDetOptions {
  int width = 640;
  int height = 640;
  int min_items = 1;
  int max_items = 12;
  float min_side = 16.f;    // side of the scaled 28x28 glyph square, drawn log-uniformly
  float max_side = 400.f;
  float min_visible = 0.4f;  // fraction of the item's own glyph pixels that must stay visible
  float alpha_threshold = 0.2f;  // a pixel belongs to an item where its weight in the final blend exceeds this
  int jpeg_quality = 90;
};

// One ground-truth object. bbox in pixels, COCO [x, y, w, h] with (x, y) the top-left corner; area is the number of
// visible glyph pixels (the COCO meaning of area: the object's mask, not its box).
struct DetObject {
  int category_id = 0;  // 1..10 (Fashion-MNIST label + 1)
  int x = 0, y = 0, w = 0, h = 0;
  int area = 0;
  int source_index = 0;  // index of the glyph in its Fashion-MNIST split
};

struct DetScene {
  Image image;
  std::vector<DetObject> objects;
};

// Glyph indices of a split grouped by label (built once; scenes draw a class uniformly, then a glyph of it).
std::array<std::vector<int>, kFmnistClasses> fmnist_index_by_class(const FmnistSplit& ds);

// Renders scene `index` of the data set (split_tag: 0 train, 1 val). Depends only on its arguments.
DetScene render_fmnist_det_scene(const FmnistSplit& ds, const std::array<std::vector<int>, kFmnistClasses>& by_class,
                                 uint64_t seed, int split_tag, int index, const FmnistDetOptions& opt);

struct FmnistDetStats {
  int images = 0;
  int objects = 0;
  int min_per_image = 0;
  int max_per_image = 0;
  std::array<int, 13> per_image_hist{};    // images with 0..12 objects (12 = 12 or more)
  std::array<int, 3> by_area{};            // small (< 32^2), medium, large (> 96^2), by the annotation's area
  std::array<int, 3> by_box_area{};        // the same ranges by box area w*h
  std::array<int, kFmnistClasses> per_class{};
  void add(const std::vector<DetObject>& objects);
};
// A markdown summary (the tables in docs/dataset.md).
std::string format_stats(const FmnistDetStats& s);

struct FmnistDetGenerateOptions {
  std::string split = "val";  // "train" (glyphs from the train split) or "val" (from t10k)
  int count = 1000;
  uint64_t seed = 0;
  std::string out_dir;
  int threads = 0;            // <= 0: all cores; the output does not depend on it
  bool progress = false;
  bool yolo_labels = false;   // also write DIR/labels/NNNNNN.txt (class cx cy w h, normalized) for ultralytics
  FmnistDetOptions scene;
};

// ds must be the split that matches opt.split. Writes the images and the COCO JSON; fills stats when given.
Status generate_fmnist_det(const FmnistSplit& ds, const FmnistDetGenerateOptions& opt, FmnistDetStats* stats);

}  // namespace qd
