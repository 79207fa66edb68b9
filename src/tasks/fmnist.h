// Fashion-MNIST: the IDX files of Debian's dataset-fashion-mnist package (gzip-compressed or plain), class names,
// and the export as 32x32 3-channel images (like CIFAR-10) for classification experiments.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tasks/image_io.h"

namespace qd {

constexpr const char* kFmnistDefaultDir = "/usr/share/datasets/fashion-mnist";
constexpr int kFmnistClasses = 10;
// "T-shirt/top", "Trouser", ..., "Ankle boot" (index = label).
const std::array<const char*, kFmnistClasses>& fmnist_class_names();

// An IDX array of unsigned bytes (type code 0x08): dims and the data in C order.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
// Parses an IDX file held in memory (gunzips it first when it starts with the gzip magic). Checks the magic, the
// element type (unsigned byte only), the rank (1..4), every dimension (1..2^24) and that the data size matches the
// dims exactly. `what` names the source in error messages.
Expected<IdxArray> parse_idx(const std::string& bytes, const std::string& what);
// Inflates gzip data; refuses output larger than max_bytes.
Expected<std::string> gunzip(const std::string& bytes, const std::string& what, size_t max_bytes = size_t{1} << 30);

struct FmnistSplit {
  int count = 0;
  int rows = 28;
  int cols = 28;
  std::vector<uint8_t> images;  // count x rows x cols, 0 = background, 255 = full ink
  std::vector<uint8_t> labels;  // count, each in 0..9
  const uint8_t* image(int i) const { return images.data() + static_cast<size_t>(i) * rows * cols; }
};

// split: "train" or "test" (also accepted: "t10k"). Reads DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz].
// A missing folder gives an error that says how to install the data set.
Expected<FmnistSplit> load_fmnist(const std::string& dir, const std::string& split);

// The 32x32 RGB version of image i: the 28x28 glyph in the middle (2 pixels of zeros each side), gray replicated.
Image fmnist_image_32(const FmnistSplit& ds, int i);

// Writes the split for classification: format "png" -> DIR/<label>_<name>/NNNNN.png (names with '/' and ' ' turned
// into '_', NNNNN the index in the split); format "npy" -> DIR/images.npy (uint8 [N,3,32,32]) + DIR/labels.npy
// (int64 [N]). `threads` <= 0 means all cores. Progress goes to stderr when `progress` is set.
Status export_fmnist_classification(const FmnistSplit& ds, const std::string& out_dir, const std::string& format,
                                   int threads = 0, bool progress = false);

}  // namespace qd
