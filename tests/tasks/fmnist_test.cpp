// Fashion-MNIST IDX reader (hand-made files, bad headers), the installed data set, and the classification export.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "core/npy.h"
#include "tasks/fmnist.h"
#include "test_util.h"

namespace qd {
namespace {

std::string idx(uint8_t type, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int sh = 24; sh >= 0; sh -= 8) s.push_back(static_cast<char>((d >> sh) & 0xFF));
  }
  s.append(data.begin(), data.end());
  return s;
}

std::string gzip(const std::string& raw) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, raw.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i);
  return v;
}

TEST(Idx, ParsesTinyFilePlainAndGzipped) {
  const std::string raw = idx(0x08, {2, 3, 4}, iota_bytes(24));
  for (const std::string& bytes : {raw, gzip(raw)}) {
    const auto a = parse_idx(bytes, "tiny");
    ASSERT_TRUE(a) << a.status().to_string();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3, 4}));
    ASSERT_EQ(a->data.size(), 24u);
    EXPECT_EQ(a->data[23], 23);
  }
}

TEST(Idx, BadFilesGiveErrors) {
  auto fails = [](const std::string& bytes, const std::string& fragment) {
    const auto a = parse_idx(bytes, "bad.idx");
    ASSERT_FALSE(a) << fragment;
    EXPECT_NE(a.status().message().find("bad.idx"), std::string::npos);
    EXPECT_NE(a.status().message().find(fragment), std::string::npos) << a.status().message();
  };
  std::string bad_magic = idx(0x08, {4}, iota_bytes(4));
  bad_magic[0] = 1;
  fails(bad_magic, "magic");
  fails(idx(0x0D, {4}, std::vector<uint8_t>(16)), "element type");
  fails(idx(0x08, {2, 3}, iota_bytes(5)), "promise 6 bytes");
  fails(idx(0x08, {2, 3}, iota_bytes(7)), "promise 6 bytes");
  fails(idx(0x08, {0, 3}, {}), "dimension 0");
  fails(idx(0x08, {}, {}), "rank 0");
  fails(std::string("\0\0\x08\x03\0\0", 6), "truncated header");
  fails("ab", "shorter");
  const std::string gz = gzip(idx(0x08, {100}, iota_bytes(100)));
  fails(gz.substr(0, gz.size() / 2), "truncated");
  std::string corrupt = gz;
  corrupt[12] ^= 0x5A;
  corrupt[13] ^= 0x5A;
  EXPECT_FALSE(parse_idx(corrupt, "bad.idx"));
}

// A two-image data set in a temp folder.
std::string write_tiny_split(const std::string& prefix, std::vector<uint8_t> labels) {
  const std::string dir = test::temp_dir("fmnist_tiny");
  std::vector<uint8_t> pixels(labels.size() * 28 * 28, 0);
  for (size_t i = 0; i < labels.size(); ++i) pixels[i * 784 + 0] = pixels[i * 784 + 783] = static_cast<uint8_t>(200 + i);
  EXPECT_TRUE(write_file_atomic(dir + "/" + prefix + "-images-idx3-ubyte.gz",
                                gzip(idx(0x08, {static_cast<uint32_t>(labels.size()), 28, 28}, pixels)))
                  .is_ok());
  EXPECT_TRUE(write_file_atomic(dir + "/" + prefix + "-labels-idx1-ubyte",
                                idx(0x08, {static_cast<uint32_t>(labels.size())}, labels))
                  .is_ok());
  return dir;
}

TEST(Fmnist, LoadsHandMadeSplitAndChecksLabels) {
  const std::string dir = write_tiny_split("t10k", {3, 9});
  const auto ds = load_fmnist(dir, "test");
  ASSERT_TRUE(ds) << ds.status().to_string();
  EXPECT_EQ(ds->count, 2);
  EXPECT_EQ(ds->labels[1], 9);
  EXPECT_EQ(ds->image(1)[783], 201);
  EXPECT_FALSE(load_fmnist(dir, "train"));  // not there
  EXPECT_FALSE(load_fmnist(dir, "bogus"));
  const auto bad = load_fmnist(write_tiny_split("train", {3, 10}), "train");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("outside 0..9"), std::string::npos);
  const auto missing = load_fmnist("/nonexistent/fmnist", "train");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("setup"), std::string::npos);
}

TEST(Fmnist, Image32PadsAndReplicates) {
  const auto ds = load_fmnist(write_tiny_split("train", {1, 2}), "train");
  ASSERT_TRUE(ds);
  const Image img = fmnist_image_32(*ds, 0);
  ASSERT_EQ(img.width, 32);
  EXPECT_EQ(img.pixel(0, 0)[0], 0);
  EXPECT_EQ(img.pixel(1, 1)[0], 0);
  EXPECT_EQ(img.pixel(2, 2)[0], 200);  // glyph pixel (0, 0)
  EXPECT_EQ(img.pixel(2, 2)[2], 200);
  EXPECT_EQ(img.pixel(29, 29)[1], 200);  // glyph pixel (27, 27)
  EXPECT_EQ(img.pixel(30, 30)[0], 0);
}

TEST(Fmnist, ExportsPngFoldersAndNpy) {
  const auto ds = load_fmnist(write_tiny_split("train", {0, 9}), "train");
  ASSERT_TRUE(ds);
  const std::string out = test::temp_dir("fmnist_export");
  ASSERT_TRUE(export_fmnist_classification(*ds, out + "/png", "png", 2).is_ok());
  EXPECT_TRUE(std::filesystem::exists(out + "/png/0_T-shirt_top/00000.png"));
  EXPECT_TRUE(std::filesystem::exists(out + "/png/9_Ankle_boot/00001.png"));
  ASSERT_TRUE(export_fmnist_classification(*ds, out + "/npy", "npy").is_ok());
  const auto images = read_npy(out + "/npy/images.npy");
  const auto labels = read_npy(out + "/npy/labels.npy");
  ASSERT_TRUE(images);
  ASSERT_TRUE(labels);
  EXPECT_EQ(images->shape(), (Shape{2, 3, 32, 32}));
  EXPECT_EQ(images->dtype(), DType::kUInt8);
  EXPECT_EQ(images->data<uint8_t>()[1 * 3072 + 2 * 1024 + 2 * 32 + 2], 201);  // image 1, channel 2, (2, 2)
  EXPECT_EQ(labels->get_i64(1), 9);
  EXPECT_FALSE(export_fmnist_classification(*ds, out + "/x", "bmp").is_ok());
}

TEST(Fmnist, InstalledDataSet) {
  if (!std::filesystem::exists(std::string(kFmnistDefaultDir) + "/t10k-images-idx3-ubyte.gz")) {
    FAIL() << kFmnistDefaultDir << " is missing: run scripts/setup.sh (it installs the Debian package "
           << "dataset-fashion-mnist)";
  }
  const auto ds = load_fmnist(kFmnistDefaultDir, "test");
  ASSERT_TRUE(ds) << ds.status().to_string();
  EXPECT_EQ(ds->count, 10000);
  EXPECT_EQ(ds->rows, 28);
  EXPECT_EQ(ds->cols, 28);
  EXPECT_EQ(ds->labels[0], 9);  // the first test image is an ankle boot
  int per_class[10] = {0};
  for (uint8_t l : ds->labels) ++per_class[l];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000);
  EXPECT_STREQ(fmnist_class_names()[0], "T-shirt/top");
  EXPECT_STREQ(fmnist_class_names()[9], "Ankle boot");
}

}  // namespace
}  // namespace qd
