#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/half.h"
#include "core/npy.h"
#include "test_util.h"

namespace qd {
namespace {

namespace fs = std::filesystem;

// A version-1.0 .npy with the given header dict (padded and terminated like numpy does) and data bytes.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const uint32_t n = static_cast<uint32_t>(header.size());
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>(n >> 24);
  }
  return out + header + data;
}

std::string f32_data(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

void expect_bad(const std::string& bytes, const std::string& phrase) {
  auto t = parse_npy(bytes, "x.npy");
  ASSERT_FALSE(t) << "parsed; expected an error containing '" << phrase << "'";
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << t.status().to_string();
  EXPECT_NE(t.status().message().find("x.npy: not a valid .npy file"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(phrase), std::string::npos)
      << "message lacks '" << phrase << "': " << t.status().message();
}

TEST(Npy, RoundTripEveryDtype) {
  const DType types[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8,  DType::kUInt8,
                         DType::kInt16,   DType::kUInt16,  DType::kInt32,   DType::kUInt32, DType::kInt64,
                         DType::kUInt64,  DType::kBool};
  const std::vector<Shape> shapes = {{}, {0}, {7}, {2, 3}, {1, 3, 4, 5}, {2, 0, 3}};
  for (DType dt : types) {
    for (const Shape& s : shapes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(s));
      Tensor t(dt, s);
      // Byte patterns that differ per element (bools 0/1).
      auto* p = static_cast<uint8_t*>(t.raw());
      for (size_t i = 0; i < t.nbytes(); ++i) p[i] = dt == DType::kBool ? (i % 3 == 0) : static_cast<uint8_t>(i * 37 + 11);
      if (dt == DType::kFloat16) {  // keep them finite halves
        for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = float_to_half(0.5f * static_cast<float>(i) - 3.f);
      }
      const std::string bytes = encode_npy(t);
      EXPECT_EQ(bytes.size() % 64, t.nbytes() % 64) << "header not 64-byte aligned";
      auto u = parse_npy(bytes, "rt");
      ASSERT_TRUE(u) << u.status().to_string();
      EXPECT_EQ(u->dtype(), dt);
      EXPECT_EQ(u->shape(), s);
      ASSERT_EQ(u->nbytes(), t.nbytes());
      if (t.nbytes()) {
        EXPECT_EQ(std::memcmp(u->raw(), t.raw(), t.nbytes()), 0);
      }
    }
  }
}

TEST(Npy, FileRoundTrip) {
  const std::string dir = test::temp_dir("npy");
  const Tensor t = test::random_f32({2, 3, 4}, 7);
  ASSERT_TRUE(write_npy(dir + "/a.npy", t).is_ok());
  auto u = read_npy(dir + "/a.npy");
  ASSERT_TRUE(u) << u.status().to_string();
  EXPECT_EQ(test::max_abs_diff(t, *u), 0.0);
  EXPECT_EQ(read_npy(dir + "/missing.npy").status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

TEST(Npy, ReadsWhatNumpyWrites) {
  // Headers as numpy writes them: versions 1 and 2, "=" and "|" byte orders, 1-d tuples with a trailing comma.
  auto a = parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f32_data({1, 2, 3, 4})), "a");
  ASSERT_TRUE(a) << a.status().to_string();
  EXPECT_EQ(a->shape(), (Shape{2, 2}));
  EXPECT_EQ(a->data<float>()[3], 4.f);
  auto b = parse_npy(npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", std::string("\x05\0\0\0\0\0\0\0", 8), 2), "b");
  ASSERT_TRUE(b) << b.status().to_string();
  EXPECT_EQ(b->dtype(), DType::kInt64);
  EXPECT_EQ(b->data<int64_t>()[0], 5);
  auto c = parse_npy(npy_bytes("{'descr': '=f4', 'fortran_order': False, 'shape': (), }", f32_data({2.5f})), "c");
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_EQ(c->rank(), 0u);
  auto d = parse_npy(npy_bytes("{'descr': '<u1', 'fortran_order': False, 'shape': (3,), }", "abc"), "d");
  ASSERT_TRUE(d) << d.status().to_string();
  EXPECT_EQ(d->dtype(), DType::kUInt8);
  auto e = parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,2,), }", f32_data({1, 2}), 3), "e");
  ASSERT_TRUE(e) << e.status().to_string();
  EXPECT_EQ(e->shape(), (Shape{1, 2}));
}

TEST(Npy, BadMagic) {
  expect_bad("", "magic");
  expect_bad("\x93NUMP", "magic");
  std::string bytes = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32_data({1}));
  bytes[1] = 'X';
  expect_bad(bytes, "magic");
  expect_bad("PK\x03\x04 this is a zip (an .npz), not an .npy", "magic");
}

TEST(Npy, BadVersion) {
  std::string bytes = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32_data({1}));
  bytes[6] = 9;
  expect_bad(bytes, "unknown format version 9");
  expect_bad(std::string("\x93NUMPY\x02\x00\x01\x00\x00", 11), "truncated header");
}

TEST(Npy, HeaderLongerThanFile) {
  std::string bytes = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32_data({1}));
  bytes[8] = '\xff';
  bytes[9] = '\x7f';
  expect_bad(bytes, "header longer than the file");
  std::string v2 = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32_data({1}), 2);
  v2[11] = '\xff';  // 4 GiB header length
  expect_bad(v2, "header longer than the file");
}

TEST(Npy, FortranOrder) {
  expect_bad(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", f32_data({1, 2, 3, 4})),
             "Fortran order is not supported");
  expect_bad(npy_bytes("{'descr': '<f4', 'fortran_order': 1, 'shape': (2, 2), }", f32_data({1, 2, 3, 4})),
             "expected True or False");
}

TEST(Npy, MissingKeys) {
  expect_bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, }", f32_data({1})), "lacks");
  expect_bad(npy_bytes("{'fortran_order': False, 'shape': (1,), }", f32_data({1})), "lacks");
  expect_bad(npy_bytes("", ""), "lacks");
}

TEST(Npy, UnsupportedDtype) {
  expect_bad(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", f32_data({1})), "unsupported dtype '>f4'");
  expect_bad(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')), "unsupported dtype");
  expect_bad(npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')), "unsupported dtype");
  expect_bad(npy_bytes("{'descr': '<U5', 'fortran_order': False, 'shape': (1,), }", std::string(20, '\0')), "unsupported dtype");
  expect_bad(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", f32_data({1})), "descr");
  expect_bad(npy_bytes("{'descr': '', 'fortran_order': False, 'shape': (1,), }", f32_data({1})), "descr");
}

TEST(Npy, BadShapeText) {
  const std::string d = f32_data({1, 2, 3, 4});
  for (const char* shape : {"(2, -2)", "(2x2)", "[2, 2]", "4", "(4)", "(2,, 2)", "(, 4)", "(2 2)", "(2, 2",
                            "(1234567890123456,)", "(a,)", "()()"}) {
    SCOPED_TRACE(shape);
    const std::string dict = std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }";
    auto t = parse_npy(npy_bytes(dict, d), "x.npy");
    ASSERT_FALSE(t) << "accepted shape " << shape;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("not a valid .npy file"), std::string::npos) << t.status().message();
  }
}

TEST(Npy, ShapeTooLarge) {
  expect_bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576, 2), }", ""), "2^40");
  expect_bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999999, 999999999999999), }", ""),
             "2^40");
}

TEST(Npy, DataShorterThanShape) {
  expect_bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f32_data({1, 2, 3})),
             "data is 12 bytes, but shape 2x3 of float32 needs 24");
  // Large shape, tiny file: an error before any allocation.
  expect_bad(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (100000000,), }", f32_data({1})), "needs 800000000");
}

TEST(Npy, DataLongerThanShape) {
  expect_bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f32_data({1, 2, 3})),
             "data is 12 bytes, but shape 2 of float32 needs 8");
}

// Fuzz regressions and seeds: each parses or fails cleanly, and what parses survives encode -> parse.
TEST(Npy, FuzzRegressionsAndSeeds) {
  int n = 0;
  for (const char* sub : {"tests/fuzz/regressions/npy", "tests/fuzz/corpus/npy"}) {
    const fs::path dir = fs::path(test::source_dir()) / sub;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().filename().string()[0] == '.') continue;
      std::ifstream f(e.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      auto t = parse_npy(bytes, e.path().string());
      if (t) {
        auto u = parse_npy(encode_npy(*t), "again");
        ASSERT_TRUE(u) << e.path();
        EXPECT_EQ(u->shape(), t->shape());
      }
      ++n;
    }
  }
  if (n == 0) GTEST_SKIP() << "no fuzz regression or seed files";
}

}  // namespace
}  // namespace qd
