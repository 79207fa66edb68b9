#include <gtest/gtest.h>

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/npy.h"
#include "core/npz.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;

Tensor arange_f32(const Shape& s) {
  Tensor t(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.5f * static_cast<float>(i) - 1.f;
  return t;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void put(std::string& s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t peek(const std::string& s, size_t off, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[off + i]);
  return v;
}
void poke(std::string& s, size_t off, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// One-member zip with the given method and payload (deflated here when method == 8), as zip tools lay it out.
std::string one_member_zip(const std::string& name, const std::string& data, int method, uint32_t crc_xor = 0,
                           uint16_t flags = 0) {
  std::string payload = data;
  if (method == 8) {
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    payload.resize(deflateBound(&zs, data.size()));
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    zs.avail_in = static_cast<uInt>(data.size());
    zs.next_out = reinterpret_cast<Bytef*>(payload.data());
    zs.avail_out = static_cast<uInt>(payload.size());
    deflate(&zs, Z_FINISH);
    payload.resize(zs.total_out);
    deflateEnd(&zs);
  }
  const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()),
                                                   static_cast<uInt>(data.size()))) ^ crc_xor;
  std::string z;
  put(z, 0x04034b50, 4);
  put(z, 20, 2);
  put(z, flags, 2);
  put(z, method, 2);
  put(z, 0, 4);
  put(z, crc, 4);
  put(z, payload.size(), 4);
  put(z, data.size(), 4);
  put(z, name.size(), 2);
  put(z, 0, 2);
  z += name + payload;
  const size_t cd = z.size();
  put(z, 0x02014b50, 4);
  put(z, 20, 2);
  put(z, 20, 2);
  put(z, flags, 2);
  put(z, method, 2);
  put(z, 0, 4);
  put(z, crc, 4);
  put(z, payload.size(), 4);
  put(z, data.size(), 4);
  put(z, name.size(), 2);
  put(z, 0, 6);
  put(z, 0, 6);
  put(z, 0, 4);  // local header offset
  z += name;
  const size_t cd_size = z.size() - cd;
  put(z, 0x06054b50, 4);
  put(z, 0, 4);
  put(z, 1, 2);
  put(z, 1, 2);
  put(z, cd_size, 4);
  put(z, cd, 4);
  put(z, 0, 2);
  return z;
}

void expect_bad(const std::string& bytes, const std::string& phrase) {
  auto a = parse_npz(bytes, "x.npz");
  ASSERT_FALSE(a) << "parsed; expected an error containing '" << phrase << "'";
  EXPECT_NE(a.status().message().find("x.npz"), std::string::npos) << a.status().message();
  EXPECT_NE(a.status().message().find(phrase), std::string::npos)
      << "message lacks '" << phrase << "': " << a.status().message();
}

TEST(Npz, RoundTrip) {
  Tensor ids(DType::kInt64, {3});
  for (int i = 0; i < 3; ++i) ids.data<int64_t>()[i] = 10 + i;
  std::vector<NpzArray> in = {{"images", arange_f32({2, 3, 4, 4})}, {"ids", ids}, {"empty", Tensor(DType::kFloat16, {0, 2})}};
  auto bytes = encode_npz(in);
  ASSERT_TRUE(bytes) << bytes.status().to_string();
  auto out = parse_npz(*bytes, "mem");
  ASSERT_TRUE(out) << out.status().to_string();
  ASSERT_EQ(out->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*out)[i].name, in[i].name);
    EXPECT_EQ((*out)[i].tensor.dtype(), in[i].tensor.dtype());
    EXPECT_EQ((*out)[i].tensor.shape(), in[i].tensor.shape());
    ASSERT_EQ((*out)[i].tensor.nbytes(), in[i].tensor.nbytes());
    if (in[i].tensor.nbytes()) {
      EXPECT_EQ(std::memcmp((*out)[i].tensor.raw(), in[i].tensor.raw(), in[i].tensor.nbytes()), 0);
    }
  }
  EXPECT_FALSE(encode_npz({{"a", ids}, {"a", ids}}));
  EXPECT_FALSE(encode_npz({{"", ids}}));
}

TEST(Npz, DeflatedMember) {
  const Tensor t = arange_f32({4, 5});
  auto a = parse_npz(one_member_zip("x.npy", encode_npy(t), 8), "x.npz");
  ASSERT_TRUE(a) << a.status().to_string();
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ((*a)[0].name, "x");
  EXPECT_EQ((*a)[0].tensor.shape(), (Shape{4, 5}));
  EXPECT_EQ((*a)[0].tensor.data<float>()[7], t.data<float>()[7]);
}

// Archives numpy itself wrote (tests/fuzz/make_seeds.py): stored members with zip64 local headers, and deflated ones.
TEST(Npz, NumpyWrittenArchives) {
  const fs::path dir = fs::path(test::source_dir()) / "tests/fuzz/corpus/npz";
  auto two = parse_npz(read_bytes(dir / "savez_two_inputs.npz"), "savez_two_inputs.npz");
  ASSERT_TRUE(two) << two.status().to_string();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].name, "images");
  EXPECT_EQ((*two)[0].tensor.shape(), (Shape{1, 3, 4, 4}));
  EXPECT_EQ((*two)[1].name, "mask");
  EXPECT_EQ((*two)[1].tensor.dtype(), DType::kBool);
  auto comp = parse_npz(read_bytes(dir / "savez_compressed.npz"), "savez_compressed.npz");
  ASSERT_TRUE(comp) << comp.status().to_string();
  ASSERT_EQ(comp->size(), 2u);
  EXPECT_EQ((*comp)[1].name, "ids");
  EXPECT_EQ((*comp)[1].tensor.data<int64_t>()[3], 3);
  // Same generator, same array: the stored and the deflated copies agree.
  EXPECT_EQ(std::memcmp((*comp)[0].tensor.raw(), (*two)[0].tensor.raw(), (*two)[0].tensor.nbytes()), 0);
  auto pos = parse_npz(read_bytes(dir / "savez_positional.npz"), "savez_positional.npz");
  ASSERT_TRUE(pos);
  EXPECT_EQ((*pos)[0].name, "arr_0");
  EXPECT_EQ((*pos)[1].name, "arr_1");
  auto empty = parse_npz(read_bytes(dir / "empty.npz"), "empty.npz");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  auto dirs = parse_npz(read_bytes(dir / "comment_and_dirs.npz"), "comment_and_dirs.npz");
  ASSERT_TRUE(dirs) << dirs.status().to_string();
  EXPECT_EQ((*dirs)[0].name, "a/b");
}

TEST(Npz, Malformed) {
  const std::string npy = encode_npy(arange_f32({2, 2}));
  expect_bad("PK", "shorter than a zip end record");
  expect_bad(npy, "this is a .npy file");
  expect_bad(std::string(40, 'x'), "missing the zip signature");
  const std::string good = one_member_zip("x.npy", npy, 0);
  ASSERT_TRUE(parse_npz(good, "x.npz"));
  expect_bad(good.substr(0, good.size() - 1), "no zip end-of-central-directory record");
  expect_bad(good.substr(0, good.size() / 2) + good.substr(good.size() - 22), "central directory lies outside");
  expect_bad(one_member_zip("x.npy", npy, 0, 0x1), "fails its CRC-32 check");
  expect_bad(one_member_zip("x.npy", npy, 0, 0, 1), "is encrypted");
  expect_bad(one_member_zip("x.txt", npy, 0), "is not a .npy array");
  auto m = parse_npz(one_member_zip("x.npy", npy, 12), "x.npz");  // bzip2
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("compression method 12 is not supported"), std::string::npos);
  // The member's .npy itself is broken: the error names the member.
  auto inner = parse_npz(one_member_zip("x.npy", npy.substr(0, npy.size() - 4), 0), "x.npz");
  ASSERT_FALSE(inner);
  EXPECT_NE(inner.status().message().find("member 'x.npy'"), std::string::npos) << inner.status().message();
  // Sizes that lie: stored with two sizes; deflate that inflates to more or less than declared.
  std::string two_sizes = one_member_zip("x.npy", npy, 0);
  const size_t cd = two_sizes.size() - 22 - (46 + 5);
  poke(two_sizes, cd + 24, npy.size() + 1, 4);
  expect_bad(two_sizes, "stored with two different sizes");
  std::string more = one_member_zip("x.npy", npy, 8);
  const size_t cd8 = more.size() - 22 - (46 + 5);
  poke(more, cd8 + 24, npy.size() - 1, 4);
  expect_bad(more, "inflates to more than");
  poke(more, cd8 + 24, npy.size() + 1, 4);
  expect_bad(more, "inflates to " + std::to_string(npy.size()) + " bytes");
  std::string cut = one_member_zip("x.npy", npy, 8);
  const size_t cdc = cut.size() - 22 - (46 + 5);
  poke(cut, cdc + 20, peek(cut, cdc + 20, 4) - 5, 4);
  expect_bad(cut, "truncated");
  std::string bomb = one_member_zip("x.npy", npy, 8);
  poke(bomb, bomb.size() - 22 - (46 + 5) + 24, 0x7fffffff, 4);
  expect_bad(bomb, "implausible inflated size");
  // Central directory pointing outside, a local header out of place, a duplicate key.
  std::string off = good;
  poke(off, off.size() - 22 - 5 - 4, 7, 4);  // the local header offset
  expect_bad(off, "local header out of place");
  std::string count = good;
  poke(count, count.size() - 22 + 10, 100, 2);
  expect_bad(count, "cannot fit the central directory");
  auto dup = encode_npz({{"a", arange_f32({1})}, {"b", arange_f32({1})}});
  ASSERT_TRUE(dup);
  std::string d = *dup;
  const size_t second_name = d.rfind("b.npy");
  d[second_name] = 'a';
  expect_bad(d, "appears twice");
  // Limits.
  auto small = parse_npz(good, "x.npz", 8);
  ASSERT_FALSE(small);
  EXPECT_NE(small.status().message().find("larger than 8 bytes"), std::string::npos);
}

// Fuzz regressions and seeds: each parses or fails cleanly, and what parses survives encode -> parse.
TEST(Npz, FuzzRegressionsAndSeeds) {
  int n = 0;
  for (const char* sub : {"tests/fuzz/regressions/npz", "tests/fuzz/corpus/npz"}) {
    const fs::path dir = fs::path(test::source_dir()) / sub;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().filename().string()[0] == '.') continue;
      auto a = parse_npz(read_bytes(e.path()), e.path().string());
      if (a) {
        auto bytes = encode_npz(*a);
        ASSERT_TRUE(bytes) << e.path();
        auto b = parse_npz(*bytes, "again");
        ASSERT_TRUE(b) << e.path();
        ASSERT_EQ(b->size(), a->size());
      }
      ++n;
    }
  }
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace qd
