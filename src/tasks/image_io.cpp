#include "tasks/image_io.h"

#include "tasks/parallel.h"

#include <cctype>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "core/file_io.h"

namespace qd {

namespace {

Status check_dims(const std::string& what, uint64_t w, uint64_t h) {
  if (w == 0 || h == 0) return invalid(what + ": image has zero width or height (" + std::to_string(w) + "x" +
                                       std::to_string(h) + ")");
  if (w > kMaxImageSide || h > kMaxImageSide) {
    return invalid(what + ": image is " + std::to_string(w) + "x" + std::to_string(h) +
                   ", larger than the limit of " + std::to_string(kMaxImageSide) + " pixels a side; resize it first");
  }
  return Status::ok();
}

Status check_image(const Image& img) {
  if (img.channels != 3 || img.width <= 0 || img.height <= 0 || img.width > kMaxImageSide ||
      img.height > kMaxImageSide || img.data.size() != img.row_bytes() * static_cast<size_t>(img.height)) {
    return invalid("cannot encode image " + std::to_string(img.width) + "x" + std::to_string(img.height) + "x" +
                   std::to_string(img.channels) + " with " + std::to_string(img.data.size()) + " bytes of data");
  }
  return Status::ok();
}

// ---------------------------------------------------------------- JPEG
// libjpeg and libpng report fatal errors through callbacks that must not return: we longjmp back to the function that
// called setjmp. C++ forbids a longjmp that skips destructors, so each *_run function below has only trivially
// destructible locals, and everything that changes after setjmp lives in a heap state object.
enum class Fail { kNone, kCorrupt, kDims, kLayout, kArithmetic };

struct JpegState {
  jpeg_error_mgr mgr;  // libjpeg hands callbacks a pointer to this member; it is first so we can cast back
  std::jmp_buf jump;
  jpeg_decompress_struct cinfo;
  char message[JMSG_LENGTH_MAX] = {0};
  Fail fail = Fail::kNone;
  const std::string* bytes = nullptr;
  Image img;
  std::vector<uint8_t> row;
};

[[noreturn]] void jpeg_on_error(j_common_ptr c) {
  auto* s = reinterpret_cast<JpegState*>(c->err);
  (*c->err->format_message)(c, s->message);
  std::longjmp(s->jump, 1);
}

void jpeg_on_message(j_common_ptr c, int level) {
  // Warnings (level -1) about corrupt-but-decodable data are common in real photo sets and are ignored, except those
  // that mean pixel data is missing: libjpeg would pad the image with gray, which we refuse to pass off as the
  // picture. They also end a tiny file that declares a huge image before libjpeg fills gigabytes with that gray.
  if (level >= 0) return;
  const char* why = nullptr;
  switch (c->err->msg_code) {
    case JWRN_JPEG_EOF: why = "file is truncated (JPEG data ends early)"; break;
    case JWRN_HIT_MARKER: why = "JPEG data ends early (premature end of data segment)"; break;
    case JWRN_BOGUS_PROGRESSION: why = "progressive JPEG scans out of order (image data missing)"; break;
    default: return;
  }
  auto* s = reinterpret_cast<JpegState*>(c->err);
  std::snprintf(s->message, sizeof(s->message), "%s", why);
  std::longjmp(s->jump, 1);
}

bool jpeg_decode_run(JpegState* s) {
  jpeg_decompress_struct& cinfo = s->cinfo;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&s->mgr);
  s->mgr.error_exit = jpeg_on_error;
  s->mgr.emit_message = jpeg_on_message;
  if (setjmp(s->jump)) {
    s->fail = Fail::kCorrupt;
    jpeg_destroy_decompress(&s->cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(s->bytes->data()), s->bytes->size());
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.image_width == 0 || cinfo.image_height == 0 || cinfo.image_width > kMaxImageSide ||
      cinfo.image_height > kMaxImageSide) {
    s->fail = Fail::kDims;
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  // Arithmetic coding stuffs zeros where its data ends, without the warning Huffman data gives, so a tiny file could
  // make libjpeg decode a whole declared 16384x16384 image of filler; such files are rare: refused.
  if (cinfo.arith_code) {
    s->fail = Fail::kArithmetic;
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // libjpeg-turbo expands grayscale to RGB itself
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&cinfo);
  const int comps = cinfo.output_components;
  if (cinfo.output_width != cinfo.image_width || cinfo.output_height != cinfo.image_height ||
      comps != (cmyk ? 4 : 3)) {
    std::snprintf(s->message, sizeof(s->message), "%d components", comps);
    s->fail = Fail::kLayout;
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  // Rows are added as they decode (into reserved, untouched memory): data that ends early costs little memory.
  s->img.width = static_cast<int>(cinfo.output_width);
  s->img.height = static_cast<int>(cinfo.output_height);
  s->img.data.reserve(s->img.row_bytes() * cinfo.output_height);
  s->row.resize(static_cast<size_t>(cinfo.output_width) * comps);
  while (cinfo.output_scanline < cinfo.output_height) {
    const size_t y = cinfo.output_scanline;
    s->img.data.resize((y + 1) * s->img.row_bytes());
    JSAMPROW rows[1] = {cmyk ? s->row.data() : s->img.data.data() + y * s->img.row_bytes()};
    jpeg_read_scanlines(&cinfo, rows, 1);
    if (cmyk) {
      // Adobe writes inverted CMYK (the usual case for CMYK JPEGs): a value is the amount of ink left out.
      uint8_t* out = s->img.data.data() + y * s->img.row_bytes();
      for (size_t x = 0; x < cinfo.output_width; ++x) {
        const int k = s->row[x * 4 + 3];
        for (int c = 0; c < 3; ++c) out[x * 3 + c] = static_cast<uint8_t>((s->row[x * 4 + c] * k + 127) / 255);
      }
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

Expected<Image> decode_jpeg(const std::string& bytes, const std::string& what) {
  auto s = std::make_unique<JpegState>();
  s->bytes = &bytes;
  if (jpeg_decode_run(s.get())) return std::move(s->img);
  switch (s->fail) {
    case Fail::kDims: return check_dims(what, s->cinfo.image_width, s->cinfo.image_height);
    case Fail::kLayout: return unsupported(what + ": unsupported JPEG color layout (" + s->message + ")");
    case Fail::kArithmetic:
      return unsupported(what + ": arithmetic-coded JPEG, which qdeploy does not read; re-encode it with the usual "
                                "Huffman coding (e.g. save it again from an image editor, or `jpegtran -optimize`)");
    default: return invalid(what + ": corrupt JPEG: " + s->message);
  }
}

struct JpegEncodeState {
  jpeg_error_mgr mgr;  // first member, as above
  std::jmp_buf jump;
  jpeg_compress_struct cinfo;
  char message[JMSG_LENGTH_MAX] = {0};
  const Image* img = nullptr;
  int quality = 95;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int): libjpeg's type
};

[[noreturn]] void jpeg_encode_on_error(j_common_ptr c) {
  auto* s = reinterpret_cast<JpegEncodeState*>(c->err);
  (*c->err->format_message)(c, s->message);
  std::longjmp(s->jump, 1);
}

bool jpeg_encode_run(JpegEncodeState* s) {
  jpeg_compress_struct& cinfo = s->cinfo;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&s->mgr);
  s->mgr.error_exit = jpeg_encode_on_error;
  if (setjmp(s->jump)) {
    jpeg_destroy_compress(&s->cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &s->buffer, &s->size);
  const Image& img = *s->img;
  cinfo.image_width = static_cast<JDIMENSION>(img.width);
  cinfo.image_height = static_cast<JDIMENSION>(img.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);  // 4:2:0, standard Huffman tables, JFIF header (it has no timestamp)
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_set_quality(&cinfo, s->quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row[1] = {const_cast<JSAMPLE*>(img.data.data() + cinfo.next_scanline * img.row_bytes())};
    jpeg_write_scanlines(&cinfo, row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

// ---------------------------------------------------------------- PNG
struct PngState {
  const std::string* bytes = nullptr;  // read: the input
  size_t pos = 0;
  std::string out;  // write: the output
  char message[256] = {0};
  Fail fail = Fail::kNone;
  png_uint_32 width = 0, height = 0;
  int color_type = 0, bit_depth = 0;
  Image img;
  std::vector<png_bytep> rows;
};

[[noreturn]] void png_on_error(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof(s->message), "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > s->bytes->size() - s->pos) png_error(png, "file is truncated (PNG data ends early)");
  std::memcpy(out, s->bytes->data() + s->pos, n);
  s->pos += n;
}

// png/info are owned by the caller, which destroys them whatever happens.
bool png_decode_run(PngState* s, png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) {
    s->fail = Fail::kCorrupt;
    return false;
  }
  png_set_read_fn(png, s, png_read_bytes);
  png_set_chunk_malloc_max(png, 64 << 20);
  // Ancillary chunks the conversion to RGB does not use are skipped unread: libpng would otherwise allocate and
  // zero a buffer of each one's declared length (text, ICC profiles and palettes it decompresses or keeps).
  static const png_byte kSkipped[] = "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0sRGB\0"
                                     "tEXt\0tIME\0zTXt";
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, kSkipped, static_cast<int>(sizeof kSkipped / 5));
  png_read_info(png, info);
  png_get_IHDR(png, info, &s->width, &s->height, &s->bit_depth, &s->color_type, nullptr, nullptr, nullptr);
  if (s->width == 0 || s->height == 0 || s->width > kMaxImageSide || s->height > kMaxImageSide) {
    s->fail = Fail::kDims;
    return false;
  }
  // Deflate compresses at most 1032:1, so a file this small cannot hold the pixel data its header declares: refuse it
  // before allocating the image (a few hundred bytes could otherwise claim 16384x16384).
  const uint64_t filtered = (uint64_t{png_get_rowbytes(png, info)} + 1) * s->height;
  if (uint64_t{s->bytes->size()} * 1032 < filtered) {
    std::snprintf(s->message, sizeof(s->message),
                  "file is truncated (%zu bytes cannot hold the %u x %u pixels of its header)", s->bytes->size(),
                  static_cast<unsigned>(s->width), static_cast<unsigned>(s->height));
    s->fail = Fail::kCorrupt;
    return false;
  }
  png_set_expand(png);  // palette -> RGB, gray < 8 bit -> 8 bit, tRNS -> alpha
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (s->color_type == PNG_COLOR_TYPE_GRAY || s->color_type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(s->width) * 3) {
    s->fail = Fail::kLayout;
    return false;
  }
  if (png_get_interlace_type(png, info) == PNG_INTERLACE_NONE) {
    // Row by row into reserved memory, as for JPEG: data that ends early costs little memory.
    s->img.width = static_cast<int>(s->width);
    s->img.height = static_cast<int>(s->height);
    s->img.data.reserve(s->img.row_bytes() * s->height);
    for (png_uint_32 y = 0; y < s->height; ++y) {
      s->img.data.resize((size_t{y} + 1) * s->img.row_bytes());
      png_read_row(png, s->img.data.data() + size_t{y} * s->img.row_bytes(), nullptr);
    }
  } else {  // the passes of an interlaced image write all rows
    s->img = Image(static_cast<int>(s->width), static_cast<int>(s->height));
    s->rows.resize(s->height);
    for (png_uint_32 y = 0; y < s->height; ++y) s->rows[y] = s->img.data.data() + size_t{y} * s->img.row_bytes();
    png_read_image(png, s->rows.data());
  }
  png_read_end(png, nullptr);  // reads to IEND: a truncated PNG is an error, not a partial image
  return true;
}

// Every chunk's declared length must fit in the file: libpng allocates (and zeroes) a buffer of that length before
// it reads the data, so a few bytes declaring a 2 GB chunk would cost 2 GB.
Status check_png_chunks(const std::string& bytes, const std::string& what) {
  size_t pos = 8;
  while (pos + 8 <= bytes.size()) {
    const auto* p = reinterpret_cast<const uint8_t*>(bytes.data() + pos);
    const uint64_t len = uint64_t{p[0]} << 24 | uint64_t{p[1]} << 16 | uint64_t{p[2]} << 8 | p[3];
    if (len > bytes.size() - pos - 8 || bytes.size() - pos - 8 - len < 4) {
      std::string name(bytes, pos + 4, 4);
      for (char& ch : name) ch = std::isalpha(static_cast<unsigned char>(ch)) ? ch : '?';
      return invalid(what + ": corrupt PNG: file is truncated (chunk '" + name + "' at byte " +
                     std::to_string(pos) + " declares " + std::to_string(len) + " bytes, past the end of the file)");
    }
    if (std::memcmp(p + 4, "IEND", 4) == 0) break;
    pos += 12 + len;
  }
  return Status::ok();
}

Expected<Image> decode_png(const std::string& bytes, const std::string& what) {
  QD_RETURN_IF_ERROR(check_png_chunks(bytes, what));
  auto s = std::make_unique<PngState>();
  s->bytes = &bytes;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s.get(), png_on_error, png_on_warning);
  if (!png) return internal("libpng: cannot create read struct");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return internal("libpng: cannot create info struct");
  }
  const bool ok = png_decode_run(s.get(), png, info);
  png_destroy_read_struct(&png, &info, nullptr);
  if (ok) return std::move(s->img);
  switch (s->fail) {
    case Fail::kDims: return check_dims(what, s->width, s->height);
    case Fail::kLayout:
      return unsupported(what + ": unsupported PNG pixel layout (color type " + std::to_string(s->color_type) +
                         ", bit depth " + std::to_string(s->bit_depth) + ")");
    default: return invalid(what + ": corrupt PNG: " + s->message);
  }
}

void png_write_bytes(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngState*>(png_get_io_ptr(png))->out.append(reinterpret_cast<const char*>(data), n);
}
void png_flush_bytes(png_structp) {}

bool png_encode_run(PngState* s, png_structp png, png_infop info, const Image& img) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, s, png_write_bytes, png_flush_bytes);
  png_set_compression_level(png, 6);
  png_set_IHDR(png, info, static_cast<png_uint_32>(img.width), static_cast<png_uint_32>(img.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, s->rows.data());
  png_write_end(png, nullptr);
  return true;
}

std::string lower_extension(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace

ImageFormat sniff_image_format(const std::string& bytes) {
  if (bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == 0xFF && static_cast<uint8_t>(bytes[1]) == 0xD8 &&
      static_cast<uint8_t>(bytes[2]) == 0xFF) {
    return ImageFormat::kJpeg;
  }
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), "\x89PNG\r\n\x1a\n", 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

Expected<Image> decode_image(const std::string& bytes, const std::string& what) {
  switch (sniff_image_format(bytes)) {
    case ImageFormat::kJpeg: return decode_jpeg(bytes, what);
    case ImageFormat::kPng: return decode_png(bytes, what);
    case ImageFormat::kUnknown: break;
  }
  if (bytes.empty()) return invalid(what + ": empty file, expected a JPEG or PNG image");
  return unsupported(what + ": not a JPEG or PNG image (unknown magic bytes); convert it to .jpg or .png");
}

Expected<std::string> encode_jpeg(const Image& img, int quality) {
  QD_RETURN_IF_ERROR(check_image(img));
  if (quality < 1 || quality > 100) return invalid("JPEG quality must be in 1..100, got " + std::to_string(quality));
  auto s = std::make_unique<JpegEncodeState>();
  s->img = &img;
  s->quality = quality;
  const bool ok = jpeg_encode_run(s.get());
  std::string out;
  if (ok) out.assign(reinterpret_cast<const char*>(s->buffer), s->size);
  std::free(s->buffer);
  if (!ok) return internal(std::string("libjpeg: cannot encode: ") + s->message);
  return out;
}

Expected<std::string> encode_png(const Image& img) {
  QD_RETURN_IF_ERROR(check_image(img));
  auto s = std::make_unique<PngState>();
  s->rows.resize(static_cast<size_t>(img.height));
  for (int y = 0; y < img.height; ++y) {
    s->rows[static_cast<size_t>(y)] = const_cast<png_bytep>(img.data.data() + static_cast<size_t>(y) * img.row_bytes());
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, s.get(), png_on_error, png_on_warning);
  if (!png) return internal("libpng: cannot create write struct");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    return internal("libpng: cannot create info struct");
  }
  const bool ok = png_encode_run(s.get(), png, info, img);
  png_destroy_write_struct(&png, &info);
  if (!ok) return internal(std::string("libpng: cannot encode: ") + s->message);
  return std::move(s->out);
}

Expected<Image> read_image(const std::string& path) {
  std::string bytes = QD_TRY(read_file(path, kMaxImageFileBytes));
  return decode_image(bytes, path);
}

Expected<std::vector<Image>> read_images(const std::vector<std::string>& paths) {
  std::vector<Image> imgs(paths.size());
  QD_RETURN_IF_ERROR(parallel_for(static_cast<int>(paths.size()), 0, "", [&](int k) -> Status {
    imgs[k] = QD_TRY(read_image(paths[k]));
    return Status::ok();
  }));
  return imgs;
}

Status write_image(const std::string& path, const Image& img, int jpeg_quality) {
  const std::string ext = lower_extension(path);
  Expected<std::string> bytes = invalid("");
  if (ext == "jpg" || ext == "jpeg") {
    bytes = encode_jpeg(img, jpeg_quality);
  } else if (ext == "png") {
    bytes = encode_png(img);
  } else {
    return invalid("cannot write '" + path + "': unknown image extension; use .jpg, .jpeg or .png");
  }
  if (!bytes) return Status(bytes.status()).prefix("cannot write '" + path + "'");
  return write_file_atomic(path, *bytes);
}

}  // namespace qd
