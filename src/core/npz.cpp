#include "core/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/file_io.h"
#include "core/npy.h"

namespace qd {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr size_t kEndSize = 22, kCentralSize = 46, kLocalSize = 30, kLocatorSize = 20, kEnd64Size = 56;
// A deflate stream expands at most about 1032:1; a larger declared size is a lie (and a zip bomb's allocation).
constexpr uint64_t kMaxDeflateRatio = 1032;

uint64_t le(const std::string& b, size_t off, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[off + i]);
  return v;
}

void put(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t crc32_of(const std::string& data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t off = 0;
  while (off < data.size()) {  // crc32 takes a uInt length
    const size_t n = std::min<size_t>(data.size() - off, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + off), static_cast<uInt>(n));
    off += n;
  }
  return static_cast<uint32_t>(crc);
}

// Raw deflate (zip method 8) of exactly `size` bytes.
Expected<std::string> inflate_raw(const char* in, size_t in_size, uint64_t size, const std::string& what) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return internal("zlib: inflateInit2 failed");
  std::string out(static_cast<size_t>(size), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
  zs.avail_in = static_cast<uInt>(std::min<size_t>(in_size, UINT32_MAX));
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(std::min<uint64_t>(size, UINT32_MAX));
  int rc = Z_OK;
  while (rc == Z_OK) {
    rc = inflate(&zs, Z_FINISH);
    const uint64_t produced = zs.total_out;
    if (rc == Z_BUF_ERROR && zs.avail_out == 0 && produced < size) {  // more than 4 GiB out: next window
      zs.avail_out = static_cast<uInt>(std::min<uint64_t>(size - produced, UINT32_MAX));
      rc = Z_OK;
    }
  }
  const uint64_t produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) return invalid(what + ": corrupt deflate data");
    if (produced >= size) return invalid(what + ": inflates to more than the " + std::to_string(size) + " bytes declared");
    return invalid(what + ": deflate data is truncated");
  }
  if (produced != size) {
    return invalid(what + ": inflates to " + std::to_string(produced) + " bytes, but " + std::to_string(size) +
                   " are declared");
  }
  return out;
}

struct Member {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, offset = 0;
};

}  // namespace

Expected<std::vector<NpzArray>> parse_npz(const std::string& b, const std::string& what, size_t max_bytes) {
  auto bad = [&](const std::string& why) { return invalid(what + ": not a valid .npz file: " + why); };
  if (b.size() < kEndSize) return bad("shorter than a zip end record");
  if (le(b, 0, 4) != kLocalSig && le(b, 0, 4) != kEndSig) {
    if (b.compare(0, 6, "\x93NUMPY") == 0) return bad("this is a .npy file (give it a .npy name)");
    return bad("missing the zip signature PK\\3\\4 (write it with numpy.savez or numpy.savez_compressed)");
  }
  // The end of central directory record: the last signature within the comment's reach.
  size_t end = std::string::npos;
  const size_t lowest = b.size() > kEndSize + 0xffff ? b.size() - kEndSize - 0xffff : 0;
  for (size_t p = b.size() - kEndSize + 1; p-- > lowest;) {
    if (le(b, p, 4) == kEndSig && p + kEndSize + le(b, p + 20, 2) == b.size()) {
      end = p;
      break;
    }
  }
  if (end == std::string::npos) return bad("no zip end-of-central-directory record (truncated?)");
  if (le(b, end + 4, 2) != 0 || le(b, end + 6, 2) != 0) return bad("multi-disk archives are not supported");
  uint64_t count = le(b, end + 10, 2), cd_size = le(b, end + 12, 4), cd_off = le(b, end + 16, 4);
  if (count == 0xffff || cd_size == 0xffffffff || cd_off == 0xffffffff) {  // zip64: the locator sits before the end
    if (end < kLocatorSize || le(b, end - kLocatorSize, 4) != kLocator64Sig) return bad("zip64 locator missing");
    const uint64_t rec = le(b, end - kLocatorSize + 8, 8);
    if (rec > end - kLocatorSize || end - kLocatorSize - rec < kEnd64Size || le(b, rec, 4) != kEnd64Sig) {
      return bad("zip64 end record out of place");
    }
    if (le(b, rec + 16, 4) != 0 || le(b, rec + 20, 4) != 0) return bad("multi-disk archives are not supported");
    count = le(b, rec + 32, 8);
    cd_size = le(b, rec + 40, 8);
    cd_off = le(b, rec + 48, 8);
  }
  if (cd_off > b.size() || cd_size > b.size() - cd_off) return bad("central directory lies outside the file");
  if (count > cd_size / kCentralSize) return bad(std::to_string(count) + " entries cannot fit the central directory");

  std::vector<Member> members;
  size_t p = static_cast<size_t>(cd_off);
  const size_t cd_end = static_cast<size_t>(cd_off + cd_size);
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_end - p < kCentralSize || le(b, p, 4) != kCentralSig) return bad("central directory entry " + std::to_string(i) + " is corrupt");
    Member m;
    m.flags = static_cast<uint16_t>(le(b, p + 8, 2));
    m.method = static_cast<uint16_t>(le(b, p + 10, 2));
    m.crc = static_cast<uint32_t>(le(b, p + 16, 4));
    m.csize = le(b, p + 20, 4);
    m.usize = le(b, p + 24, 4);
    const size_t name_len = le(b, p + 28, 2), extra_len = le(b, p + 30, 2), comment_len = le(b, p + 32, 2);
    m.offset = le(b, p + 42, 4);
    if (le(b, p + 34, 2) != 0) return bad("multi-disk archives are not supported");
    if (cd_end - p - kCentralSize < name_len + extra_len + comment_len) return bad("central directory entry overruns");
    m.name = b.substr(p + kCentralSize, name_len);
    // zip64 extra field: the 64-bit values of the fields stored as 0xffffffff, in this order.
    size_t e = p + kCentralSize + name_len;
    const size_t e_end = e + extra_len;
    while (e_end - e >= 4) {
      const uint64_t id = le(b, e, 2), len = le(b, e + 2, 2);
      if (len > e_end - e - 4) return bad("extra field of '" + m.name + "' overruns");
      if (id == 1) {
        size_t f = e + 4;
        const size_t f_end = f + len;
        for (uint64_t* field : {&m.usize, &m.csize, &m.offset}) {
          if (*field != 0xffffffff) continue;
          if (f_end - f < 8) return bad("zip64 field of '" + m.name + "' is short");
          *field = le(b, f, 8);
          f += 8;
        }
      }
      e += 4 + len;
    }
    members.push_back(std::move(m));
    p += kCentralSize + name_len + extra_len + comment_len;
  }

  std::vector<NpzArray> out;
  std::set<std::string> seen;
  uint64_t total = 0;
  for (const Member& m : members) {
    const std::string where = what + ": member '" + m.name + "'";
    if (m.flags & 1) return bad("member '" + m.name + "' is encrypted");
    if (m.name.size() < 5 || m.name.compare(m.name.size() - 4, 4, ".npy") != 0) {
      return bad("member '" + m.name + "' is not a .npy array (numpy.savez writes KEY.npy)");
    }
    const std::string key = m.name.substr(0, m.name.size() - 4);
    if (!seen.insert(key).second) return bad("array '" + key + "' appears twice");
    if (m.offset > b.size() || b.size() - m.offset < kLocalSize || le(b, m.offset, 4) != kLocalSig) {
      return bad("member '" + m.name + "': local header out of place");
    }
    const uint64_t data = m.offset + kLocalSize + le(b, m.offset + 26, 2) + le(b, m.offset + 28, 2);
    if (data > b.size() || m.csize > b.size() - data) return bad("member '" + m.name + "': data lies outside the file");
    if (m.usize > max_bytes - std::min<uint64_t>(total, max_bytes)) {
      return invalid(what + ": arrays larger than " + std::to_string(max_bytes) + " bytes in all");
    }
    total += m.usize;
    std::string bytes;
    if (m.method == 0) {
      if (m.csize != m.usize) return bad("member '" + m.name + "' is stored with two different sizes");
      bytes = b.substr(static_cast<size_t>(data), static_cast<size_t>(m.csize));
    } else if (m.method == 8) {
      if (m.usize > (m.csize + 1) * kMaxDeflateRatio) return bad("member '" + m.name + "': implausible inflated size");
      bytes = QD_TRY(inflate_raw(b.data() + data, static_cast<size_t>(m.csize), m.usize, where));
    } else {
      return unsupported(where + ": zip compression method " + std::to_string(m.method) +
                         " is not supported (stored or deflate: numpy.savez, numpy.savez_compressed)");
    }
    if (crc32_of(bytes) != m.crc) return bad("member '" + m.name + "' fails its CRC-32 check (corrupt file)");
    Tensor t = QD_TRY(parse_npy(bytes, where));
    out.push_back({key, std::move(t)});
  }
  return out;
}

Expected<std::vector<NpzArray>> read_npz(const std::string& path) {
  auto bytes = read_file(path);
  if (!bytes) return bytes.status();
  return parse_npz(*bytes, path);
}

Expected<std::string> encode_npz(const std::vector<NpzArray>& arrays) {
  std::string out, central;
  std::set<std::string> seen;
  for (const NpzArray& a : arrays) {
    if (a.name.empty() || !seen.insert(a.name).second) return invalid("npz: array name '" + a.name + "' is empty or repeated");
    const std::string name = a.name + ".npy";
    const std::string data = encode_npy(a.tensor);
    if (name.size() > 0xffff || data.size() >= 0xffffffffu || out.size() >= 0xffffffffu) {
      return invalid("npz: archive too large to write without zip64 (array '" + a.name + "')");
    }
    const uint32_t crc = crc32_of(data);
    const uint64_t offset = out.size();
    auto header = [&](std::string& s, bool central_entry) {
      put(s, central_entry ? kCentralSig : kLocalSig, 4);
      if (central_entry) put(s, 20, 2);  // version made by
      put(s, 20, 2);                     // version needed
      put(s, 0, 2);                      // flags
      put(s, 0, 2);                      // stored
      put(s, 0, 2);                      // time
      put(s, 0x21, 2);                   // date: 1980-01-01
      put(s, crc, 4);
      put(s, data.size(), 4);
      put(s, data.size(), 4);
      put(s, name.size(), 2);
      put(s, 0, 2);  // extra
      if (central_entry) {
        put(s, 0, 2);  // comment
        put(s, 0, 2);  // disk
        put(s, 0, 2);  // internal attributes
        put(s, 0, 4);  // external attributes
        put(s, offset, 4);
      }
      s += name;
    };
    header(out, false);
    out += data;
    header(central, true);
  }
  if (arrays.size() >= 0xffff || out.size() >= 0xffffffffu) return invalid("npz: too many or too large arrays for zip");
  const uint64_t cd_off = out.size();
  out += central;
  put(out, kEndSig, 4);
  put(out, 0, 4);  // disks
  put(out, arrays.size(), 2);
  put(out, arrays.size(), 2);
  put(out, central.size(), 4);
  put(out, cd_off, 4);
  put(out, 0, 2);  // comment
  return out;
}

Status write_npz(const std::string& path, const std::vector<NpzArray>& arrays) {
  std::string bytes = QD_TRY(encode_npz(arrays));
  return write_file_atomic(path, bytes);
}

}  // namespace qd
