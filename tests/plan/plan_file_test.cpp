// The plan container: round trip, and every kind of damage ends in an error that says what is wrong.
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <fstream>

#include "core/file_io.h"
#include "plan/byte_io.h"
#include "plan/plan_file.h"
#include "test_util.h"

namespace qd {
namespace {

PlanFile sample_plan() {
  PlanFile p;
  p.header.qdeploy_version = "0.1.0";
  p.header.target = "cuda";
  p.header.sm = 86;
  p.header.cuda_runtime_version = 12020;
  p.header.cudnn_version = 8900;
  p.header.precision = "int8";
  p.header.profile.push_back({"images", {1, 3, 320, 320}, {4, 3, 640, 640}, {8, 3, 640, 640}});
  p.header.profile.push_back({"extra", {-1, 2}, {-1, 2}, {-1, 2}});
  p.add("weights", std::string("\0\1\2\3", 4));
  p.add("empty", "");
  return p;
}

std::string encode(const PlanFile& p) {
  auto bytes = encode_plan(p);
  EXPECT_TRUE(bytes) << bytes.status().to_string();
  return bytes ? *bytes : std::string();
}

Expected<PlanFile> decode(const std::string& bytes) {
  return decode_plan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// Recomputes the checksum after an edit, so that the edit reaches the parser behind it.
std::string reseal(std::string bytes) {
  const uint64_t sum = plan_checksum(bytes.data(), bytes.size() - 8);
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<char>((sum >> (8 * i)) & 0xff);
  return bytes;
}

void expect_error(const Expected<PlanFile>& p, const std::string& phrase) {
  ASSERT_FALSE(p) << "decoded";
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << p.status().to_string();
  EXPECT_NE(p.status().message().find(phrase), std::string::npos) << p.status().to_string();
}

TEST(PlanFile, RoundTrip) {
  const PlanFile p = sample_plan();
  const std::string bytes = encode(p);
  EXPECT_EQ(bytes.compare(0, 8, std::string(kPlanMagic, 8)), 0);
  auto q = decode(bytes);
  ASSERT_TRUE(q) << q.status().to_string();
  EXPECT_EQ(q->header.format_version, kPlanFormatVersion);
  EXPECT_EQ(q->header.qdeploy_version, "0.1.0");
  EXPECT_EQ(q->header.target, "cuda");
  EXPECT_EQ(q->header.sm, 86u);
  EXPECT_EQ(q->header.cuda_runtime_version, 12020u);
  EXPECT_EQ(q->header.cudnn_version, 8900u);
  EXPECT_EQ(q->header.precision, "int8");
  ASSERT_EQ(q->header.profile.size(), 2u);
  EXPECT_EQ(q->header.profile[0].max, (Shape{8, 3, 640, 640}));
  EXPECT_EQ(q->header.profile[1].opt, (Shape{-1, 2}));
  ASSERT_EQ(q->sections.size(), 2u);
  ASSERT_NE(q->find("weights"), nullptr);
  EXPECT_EQ(q->find("weights")->data, std::string("\0\1\2\3", 4));
  EXPECT_EQ(q->find("empty")->data, "");
  EXPECT_EQ(q->find("absent"), nullptr);
  EXPECT_EQ(encode(*q), bytes);  // deterministic
}

TEST(PlanFile, FileRoundTripAndMagic) {
  const std::string dir = test::temp_dir("plan_file");
  const std::string path = dir + "/m.plan";
  ASSERT_TRUE(write_plan(path, sample_plan()).is_ok());
  auto q = read_plan(path);
  ASSERT_TRUE(q) << q.status().to_string();
  EXPECT_EQ(q->header.sm, 86u);
  auto missing = read_plan(dir + "/absent.plan");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST(PlanFile, WrongMagic) {
  std::string bytes = encode(sample_plan());
  bytes[0] = 'X';
  expect_error(decode(bytes), "not a qdeploy plan");
  expect_error(decode("QDPL"), "not a qdeploy plan");
  expect_error(decode(""), "not a qdeploy plan");
  expect_error(decode(std::string("\x08\x07\x12\x04onnx", 8)), "not a qdeploy plan");
  bytes[0] = 'Q';
  bytes[7] = 2;
  EXPECT_TRUE(looks_like_plan(bytes.data(), bytes.size()));
  expect_error(decode(bytes), "starts with \"QDPLAN\" but not with this qdeploy's plan magic");
}

TEST(PlanFile, OtherFormatVersion) {
  std::string bytes = encode(sample_plan());
  bytes[8] = kPlanFormatVersion + 1;  // the version comes before the checksum: a future format may checksum differently
  expect_error(decode(bytes), "plan format v" + std::to_string(kPlanFormatVersion + 1) + ", this qdeploy reads v" +
                                  std::to_string(kPlanFormatVersion) + ": rebuild the plan with `qdeploy build`");
  bytes[8] = 0;
  expect_error(decode(bytes), "plan format v0");
}

TEST(PlanFile, EveryTruncationFails) {
  const std::string bytes = encode(sample_plan());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto q = decode(bytes.substr(0, n));
    ASSERT_FALSE(q) << n;
    EXPECT_EQ(q.status().code(), StatusCode::kInvalidArgument) << n;
  }
  expect_error(decode(bytes.substr(0, bytes.size() - 1)), "corrupted or truncated");
}

TEST(PlanFile, EveryFlippedByteFails) {
  const std::string bytes = encode(sample_plan());
  for (size_t i = 8 + 4; i < bytes.size(); ++i) {  // past magic and version, which have their own messages
    std::string b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0x10);
    expect_error(decode(b), "corrupted or truncated");
  }
}

TEST(PlanFile, HugeCountsAndLengthsAreRefusedWithoutAllocating) {
  // A plan whose first header string claims 4 GiB.
  std::string bytes = encode(sample_plan());
  for (int i = 0; i < 4; ++i) bytes[12 + i] = '\xff';
  expect_error(decode(reseal(bytes)), "qdeploy version is 4294967295 bytes long");

  // Section count 2^32-1, then a section claiming 2^64-1 bytes.
  PlanFile p;
  p.header.qdeploy_version = "x";
  std::string empty = encode(p);
  const size_t count_at = empty.size() - 8 - 4;
  for (int i = 0; i < 4; ++i) empty[count_at + i] = '\xff';
  expect_error(decode(reseal(empty)), "count of sections");

  p.add("s", "abc");
  std::string one = encode(p);
  const size_t size_at = one.size() - 8 - 3 - 8;
  for (int i = 0; i < 8; ++i) one[size_at + i] = '\xff';
  expect_error(decode(reseal(one)), "section 's' needs 18446744073709551615 bytes");
}

TEST(PlanFile, TrailingBytesAndBadHeaderValues) {
  std::string bytes = encode(sample_plan());
  bytes.insert(bytes.size() - 8, "zz");
  expect_error(decode(reseal(bytes)), "unexpected bytes at the end");

  PlanFile p = sample_plan();
  p.header.profile[0].max = {8, 3, 640, 100};  // opt > max: refused on write ...
  EXPECT_FALSE(encode_plan(p));
  p = sample_plan();
  p.header.precision = "int4";
  EXPECT_FALSE(encode_plan(p));
  // ... and on read (a writer with a bug, or a crafted file).
  std::string good = encode(sample_plan());
  const size_t at = good.find("int8");
  ASSERT_NE(at, std::string::npos);
  good.replace(at, 4, "int4");
  expect_error(decode(reseal(good)), "unknown plan precision 'int4'");
  std::string rank = encode(sample_plan());
  const size_t r = rank.find("images") + 6;  // rank of min follows the name
  rank[r] = 9;
  expect_error(decode(reseal(rank)), "rank 9");
}

TEST(PlanFile, DuplicateSectionsRefused) {
  PlanFile p;
  p.add("a", "1");
  p.add("a", "2");
  EXPECT_FALSE(encode_plan(p));
}

TEST(PlanFile, CheckTarget) {
  PlanHeader h;
  h.target = "cuda";
  h.sm = 86;
  EXPECT_TRUE(check_plan_target(h, 86).is_ok());
  const Status other = check_plan_target(h, 90);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.message().find("built for sm_86 (compute capability 8.6) but this GPU is sm_90"), std::string::npos)
      << other.message();
  EXPECT_NE(other.message().find("qdeploy build"), std::string::npos);
  h.target = "cpu";
  EXPECT_FALSE(check_plan_target(h, 86).is_ok());
}

TEST(PlanFile, ShapeProfileChecks) {
  using M = std::map<std::string, Shape>;
  EXPECT_TRUE(check_shape_profile({}, {}, {}).is_ok());
  EXPECT_TRUE(check_shape_profile(M{{"x", {1, 3}}}, M{{"x", {4, 3}}}, M{{"x", {8, 3}}}).is_ok());
  const Status missing = check_shape_profile(M{{"x", {1, 3}}}, M{{"x", {4, 3}}}, {});
  EXPECT_NE(missing.message().find("needs all of --min, --opt and --max"), std::string::npos) << missing.message();
  const Status rank = check_shape_profile(M{{"x", {1, 3}}}, M{{"x", {4, 3}}}, M{{"x", {8}}});
  EXPECT_NE(rank.message().find("same rank"), std::string::npos) << rank.message();
  const Status order = check_shape_profile(M{{"x", {1, 3}}}, M{{"x", {9, 3}}}, M{{"x", {8, 3}}});
  EXPECT_NE(order.message().find("min <= opt <= max"), std::string::npos) << order.message();
}

TEST(PlanFile, IoAndLayersSections) {
  PlanIo io;
  io.inputs.push_back({"images", DType::kInt8, {-1, 3, 640, 640}, true, 0.0078721f});
  io.outputs.push_back({"out", DType::kInt64, {}});
  auto back = decode_plan_io(encode_plan_io(io));
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->inputs[0].shape, (Shape{-1, 3, 640, 640}));
  EXPECT_TRUE(back->inputs[0].nhwc);
  EXPECT_EQ(back->inputs[0].scale, 0.0078721f);
  EXPECT_EQ(plan_tensor_line(back->inputs[0]), "images  int8[?x3x640x640]  nhwc  scale 0.0078721");
  EXPECT_EQ(back->outputs[0].dtype, DType::kInt64);
  EXPECT_FALSE(back->outputs[0].nhwc);
  EXPECT_EQ(plan_tensor_line(back->outputs[0]), "out  int64[scalar]");
  EXPECT_FALSE(decode_plan_io(encode_plan_io(io).substr(0, 10)));
  io.inputs[0].scale = NAN;
  EXPECT_FALSE(decode_plan_io(encode_plan_io(io)));

  std::vector<PlanLayer> layers = {{"conv1", "Conv", 1000, "int8"}, {"head", "Conv", 5, "float (asked)"}};
  auto l = decode_plan_layers(encode_plan_layers(layers));
  ASSERT_TRUE(l) << l.status().to_string();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[1].precision, "float (asked)");
  EXPECT_EQ((*l)[0].macs, 1000);
  const std::string enc = encode_plan_layers(layers);
  for (size_t n = 0; n < enc.size(); ++n) EXPECT_FALSE(decode_plan_layers(enc.substr(0, n))) << n;
}

TEST(ByteReader, StickyErrors) {
  ByteWriter w;
  w.u32(7);
  w.str("abc");
  ByteReader r(w.bytes(), "test");
  EXPECT_EQ(r.u32(), 7u);
  EXPECT_EQ(r.str("s"), "abc");
  EXPECT_EQ(r.u64(), 0u);  // past the end
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.u32(), 0u);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace qd
