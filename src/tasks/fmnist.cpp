#include "tasks/fmnist.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "core/npy.h"
#include "core/tensor.h"
#include "tasks/parallel.h"

namespace qd {

const std::array<const char*, kFmnistClasses>& fmnist_class_names() {
  static const std::array<const char*, kFmnistClasses> kNames = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  return kNames;
}

Expected<std::string> gunzip(const std::string& bytes, const std::string& what, size_t max_bytes) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return internal("zlib: inflateInit2 failed");
  std::string out;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(std::min<size_t>(bytes.size(), UINT32_MAX));
  char chunk[1 << 16];
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof(chunk);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = sizeof(chunk) - zs.avail_out;
    if (out.size() + produced > max_bytes) {
      inflateEnd(&zs);
      return invalid(what + ": decompressed data larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(chunk, produced);
    if (rc == Z_STREAM_END) {
      // Concatenated gzip members are one valid stream; go on while input remains.
      const size_t used = static_cast<size_t>(reinterpret_cast<const char*>(zs.next_in) - bytes.data());
      if (used >= bytes.size()) break;
      inflateReset(&zs);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data() + used));
      zs.avail_in = static_cast<uInt>(std::min<size_t>(bytes.size() - used, UINT32_MAX));
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
      inflateEnd(&zs);
      return invalid(what + ": gzip data is truncated; download or reinstall the file");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      return invalid(what + ": corrupt gzip data (" + msg + ")");
    }
  }
  inflateEnd(&zs);
  return out;
}

Expected<IdxArray> parse_idx(const std::string& raw, const std::string& what) {
  std::string inflated;
  const std::string* bytes = &raw;
  if (raw.size() >= 2 && static_cast<uint8_t>(raw[0]) == 0x1f && static_cast<uint8_t>(raw[1]) == 0x8b) {
    inflated = QD_TRY(gunzip(raw, what));
    bytes = &inflated;
  }
  const std::string& b = *bytes;
  auto bad = [&](const std::string& why) { return invalid(what + ": not a valid IDX file: " + why); };
  if (b.size() < 4) return bad("shorter than the 4-byte magic");
  if (b[0] != 0 || b[1] != 0) return bad("magic does not start with two zero bytes");
  if (static_cast<uint8_t>(b[2]) != 0x08) {
    char type[8];
    std::snprintf(type, sizeof(type), "0x%02x", static_cast<uint8_t>(b[2]));
    return unsupported(what + ": IDX element type " + type + " is not supported (only unsigned bytes, 0x08)");
  }
  const int rank = static_cast<uint8_t>(b[3]);
  if (rank < 1 || rank > 4) return bad("rank " + std::to_string(rank) + " is outside 1..4");
  if (b.size() < 4 + 4 * static_cast<size_t>(rank)) return bad("truncated header");
  IdxArray out;
  uint64_t total = 1;
  for (int i = 0; i < rank; ++i) {
    const auto* p = reinterpret_cast<const uint8_t*>(b.data() + 4 + 4 * i);
    const uint64_t d = (uint64_t{p[0]} << 24) | (uint64_t{p[1]} << 16) | (uint64_t{p[2]} << 8) | p[3];
    if (d == 0 || d > (uint64_t{1} << 24)) return bad("dimension " + std::to_string(i) + " is " + std::to_string(d));
    total *= d;
    if (total > (uint64_t{1} << 32)) return bad("more than 2^32 elements");
    out.dims.push_back(static_cast<int64_t>(d));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (b.size() - header != total) {
    return bad("the dims promise " + std::to_string(total) + " bytes of data but the file has " +
               std::to_string(b.size() - header));
  }
  out.data.assign(reinterpret_cast<const uint8_t*>(b.data()) + header,
                  reinterpret_cast<const uint8_t*>(b.data()) + b.size());
  return out;
}

namespace {

Expected<IdxArray> read_idx(const std::string& dir, const std::string& stem) {
  for (const char* suffix : {".gz", ""}) {
    const std::string path = dir + "/" + stem + suffix;
    if (std::filesystem::exists(path)) {
      std::string bytes = QD_TRY(read_file(path, uint64_t{1} << 30));
      return parse_idx(bytes, path);
    }
  }
  return not_found("Fashion-MNIST file '" + dir + "/" + stem + ".gz' not found; install the data set with "
                   "scripts/setup.sh (Debian package dataset-fashion-mnist) or pass the folder that holds it");
}

}  // namespace

Expected<FmnistSplit> load_fmnist(const std::string& dir, const std::string& split) {
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test" || split == "t10k" || split == "val") {
    prefix = "t10k";
  } else {
    return invalid("unknown Fashion-MNIST split '" + split + "'; use train or test");
  }
  if (!std::filesystem::is_directory(dir)) {
    return not_found("Fashion-MNIST folder '" + dir + "' does not exist; run scripts/setup.sh (it installs the "
                     "Debian package dataset-fashion-mnist) or pass --fmnist-dir");
  }
  IdxArray images = QD_TRY(read_idx(dir, prefix + "-images-idx3-ubyte"));
  IdxArray labels = QD_TRY(read_idx(dir, prefix + "-labels-idx1-ubyte"));
  if (images.dims.size() != 3 || images.dims[1] > 1024 || images.dims[2] > 1024) {
    return invalid(dir + ": the " + prefix + " images file is not an [N, rows, cols] array of at most 1024x1024");
  }
  if (labels.dims.size() != 1 || labels.dims[0] != images.dims[0]) {
    return invalid(dir + ": the " + prefix + " labels file does not hold one label per image (" +
                   std::to_string(labels.dims.empty() ? 0 : labels.dims[0]) + " labels, " +
                   std::to_string(images.dims[0]) + " images)");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kFmnistClasses) {
      return invalid(dir + ": label " + std::to_string(i) + " is " + std::to_string(labels.data[i]) +
                     ", outside 0..9");
    }
  }
  FmnistSplit out;
  out.count = static_cast<int>(images.dims[0]);
  out.rows = static_cast<int>(images.dims[1]);
  out.cols = static_cast<int>(images.dims[2]);
  out.images = std::move(images.data);
  out.labels = std::move(labels.data);
  return out;
}

Image fmnist_image_32(const FmnistSplit& ds, int i) {
  Image img(32, 32, 0);
  const int off_y = (32 - ds.rows) / 2, off_x = (32 - ds.cols) / 2;
  const uint8_t* g = ds.image(i);
  for (int y = 0; y < ds.rows && y + off_y < 32; ++y) {
    for (int x = 0; x < ds.cols && x + off_x < 32; ++x) {
      if (y + off_y < 0 || x + off_x < 0) continue;
      uint8_t* p = img.pixel(x + off_x, y + off_y);
      p[0] = p[1] = p[2] = g[y * ds.cols + x];
    }
  }
  return img;
}

namespace {

std::string class_folder(int label) {
  std::string name = fmnist_class_names()[static_cast<size_t>(label)];
  for (char& c : name) {
    if (c == '/' || c == ' ') c = '_';
  }
  return std::to_string(label) + "_" + name;
}

}  // namespace

Status export_fmnist_classification(const FmnistSplit& ds, const std::string& out_dir, const std::string& format,
                                   int threads, bool progress) {
  if (ds.rows > 32 || ds.cols > 32) return invalid("Fashion-MNIST images larger than 32x32 cannot be exported");
  QD_RETURN_IF_ERROR(make_dirs(out_dir));
  if (format == "npy") {
    Tensor images(DType::kUInt8, {ds.count, 3, 32, 32});
    Tensor labels(DType::kInt64, {ds.count});
    for (int i = 0; i < ds.count; ++i) {
      const Image img = fmnist_image_32(ds, i);
      uint8_t* dst = images.data<uint8_t>() + static_cast<size_t>(i) * 3 * 32 * 32;
      for (int c = 0; c < 3; ++c) {
        for (int p = 0; p < 32 * 32; ++p) dst[c * 1024 + p] = img.data[static_cast<size_t>(p) * 3 + c];
      }
      labels.data<int64_t>()[i] = ds.labels[static_cast<size_t>(i)];
    }
    QD_RETURN_IF_ERROR(write_npy(out_dir + "/images.npy", images));
    return write_npy(out_dir + "/labels.npy", labels);
  }
  if (format != "png") return invalid("unknown export format '" + format + "'; use png or npy");
  for (int c = 0; c < kFmnistClasses; ++c) QD_RETURN_IF_ERROR(make_dirs(out_dir + "/" + class_folder(c)));
  return parallel_for(ds.count, threads, progress ? "fmnist-cls" : "", [&](int i) -> Status {
    char name[16];
    std::snprintf(name, sizeof(name), "%05d.png", i);
    const std::string path = out_dir + "/" + class_folder(ds.labels[static_cast<size_t>(i)]) + "/" + name;
    return write_image(path, fmnist_image_32(ds, i));
  });
}

}  // namespace qd
