// Little-endian binary encoding for plan files. ByteWriter appends; ByteReader reads with a bounds check on every
// access and a sticky error: after the first failure every read returns a zero value, so decoders check status() at
// the points where a value decides an allocation or a loop, instead of after every field.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/status.h"

namespace qd {

// Limits that keep a corrupted count or length from turning into a large allocation.
constexpr size_t kMaxPlanString = size_t{1} << 16;  // names, versions, layer patterns
constexpr uint32_t kMaxPlanRank = 8;

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    u32(bits);
  }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void shape(const Shape& s) {
    u32(static_cast<uint32_t>(s.size()));
    for (int64_t d : s) i64(d);
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  void shape_map(const std::map<std::string, Shape>& m) {
    u32(static_cast<uint32_t>(m.size()));
    for (const auto& [name, s] : m) {
      str(name);
      shape(s);
    }
  }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }
  size_t size() const { return out_.size(); }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

class ByteReader {
 public:
  // `what` names the data in errors ("section 'graph'").
  ByteReader(const void* data, size_t size, std::string what)
      : p_(static_cast<const uint8_t*>(data)), n_(size), what_(std::move(what)) {}
  ByteReader(const std::string& data, std::string what) : ByteReader(data.data(), data.size(), std::move(what)) {}

  bool ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  size_t left() const { return n_ - pos_; }
  size_t pos() const { return pos_; }
  // Records the first error (later ones would only be consequences of it).
  void fail(const std::string& msg) {
    if (status_.is_ok()) status_ = invalid(what_ + ": " + msg);
  }

  uint8_t u8() { return static_cast<uint8_t>(le(1, "a byte")); }
  uint32_t u32() { return static_cast<uint32_t>(le(4, "a 32-bit field")); }
  uint64_t u64() { return le(8, "a 64-bit field"); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  float f32() {
    const uint32_t bits = u32();
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  // n raw bytes; the pointer stays valid as long as the input does (nullptr after an error).
  const uint8_t* raw(uint64_t n, const char* what) {
    if (!ok()) return nullptr;
    if (n > left()) {
      fail(std::string(what) + " needs " + std::to_string(n) + " bytes but only " + std::to_string(left()) +
           " are left (truncated)");
      return nullptr;
    }
    const uint8_t* p = p_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  std::string str(const char* what, size_t max_len = kMaxPlanString) {
    const uint32_t len = u32();
    if (!ok()) return {};
    if (len > max_len) {
      fail(std::string(what) + " is " + std::to_string(len) + " bytes long, more than the limit of " +
           std::to_string(max_len));
      return {};
    }
    const uint8_t* p = raw(len, what);
    return p ? std::string(reinterpret_cast<const char*>(p), len) : std::string();
  }
  // A count of items that each take at least `min_item_bytes` in the input: a count the remaining bytes cannot
  // hold is an error, so a caller may reserve() what it returns.
  uint32_t count(const char* what, size_t min_item_bytes) {
    const uint32_t n = u32();
    if (!ok()) return 0;
    if (min_item_bytes && n > left() / min_item_bytes) {
      fail(std::string("count of ") + what + " (" + std::to_string(n) + ") exceeds what the remaining " +
           std::to_string(left()) + " bytes can hold");
      return 0;
    }
    return n;
  }
  // A shape: rank <= 8, dims >= -1 (-1: chosen at run time).
  Shape shape(const char* what) {
    const uint32_t rank = u32();
    if (!ok()) return {};
    if (rank > kMaxPlanRank) {
      fail(std::string(what) + " has rank " + std::to_string(rank) + "; plans hold ranks up to " +
           std::to_string(kMaxPlanRank));
      return {};
    }
    Shape s(rank);
    for (auto& d : s) {
      d = i64();
      if (ok() && d < -1) fail(std::string(what) + " has a negative dim " + std::to_string(d));
    }
    return ok() ? s : Shape{};
  }
  std::vector<std::string> strs(const char* what) {
    std::vector<std::string> v(count(what, 4));
    for (auto& s : v) s = str(what);
    return ok() ? v : std::vector<std::string>{};
  }
  std::map<std::string, Shape> shape_map(const char* what) {
    std::map<std::string, Shape> m;
    const uint32_t n = count(what, 8);
    for (uint32_t i = 0; i < n && ok(); ++i) {
      std::string name = str(what);
      Shape s = shape(what);
      if (ok() && !m.emplace(name, s).second) fail(std::string(what) + ": '" + name + "' is listed twice");
    }
    return ok() ? m : std::map<std::string, Shape>{};
  }
  // An error unless every byte was consumed (trailing bytes mean a writer and reader disagree on the layout).
  void expect_end() {
    if (ok() && left() != 0) fail(std::to_string(left()) + " unexpected bytes at the end");
  }

 private:
  uint64_t le(int n, const char* what) {
    const uint8_t* p = raw(static_cast<uint64_t>(n), what);
    if (!p) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
  }
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  std::string what_;
  Status status_;
};

}  // namespace qd
