// The public API's data-driven steps (include/qdeploy/quantize.h: calibration and sensitivity on the caller's
// batches, top-k) and the CPU side of external synchronisation and load(plan, device_index), which the Python
// bindings build on. tests/cuda/external_sync_test.cpp runs the GPU side.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "qdeploy/qdeploy.h"
#include "test_util.h"

namespace qd {
namespace {

std::string model_bn() { return test::source_dir() + "/models/model_bn.onnx"; }

// Batch k of ModelBN's input [1, 3, 32, 32]: a deterministic pattern scaled by k + 1.
qdeploy::BatchSource pattern_source(int n) {
  qdeploy::BatchSource s;
  s.num_batches = n;
  s.batch = [](int k) -> qdeploy::Expected<qdeploy::TensorMap> {
    qdeploy::HostTensor t(qdeploy::DataType::kFloat32, {1, 3, 32, 32});
    float* p = t.data_as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>((i * 7 + k) % 17) / 16.f * (k + 1) / 4.f;
    return qdeploy::TensorMap{{"input", std::move(t)}};
  };
  return s;
}

TEST(PublicCalibrate, ScalesFromCallerBatchesMatchTheCache) {
  qdeploy::CalibrationOptions opt;
  opt.algo = "minmax";
  auto cal = qdeploy::calibrate(model_bn(), pattern_source(4), opt);
  ASSERT_TRUE(cal) << cal.status().message();
  EXPECT_EQ(cal->algorithm, "MinMaxCalibration");
  ASSERT_FALSE(cal->scales.empty());
  EXPECT_EQ(cal->scales.front().first, "input");
  // minmax: the input's amax is the largest value fed, (16/16) * 4/4 = 1 in batch 3.
  EXPECT_FLOAT_EQ(cal->scales.front().second, 1.f / 127.f);
  const std::string path = test::temp_dir("public_quantize") + "/public_calib.cache";
  ASSERT_TRUE(cal->save(path));
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(text.str(), cal->to_string());
  EXPECT_EQ(text.str().rfind("TRT-", 0), 0u);
  std::remove(path.c_str());
}

// auto with held-out batches: the last two batches check the whole model (five configurations' output SNRs, one
// kept), and do not calibrate: the input's minmax candidate is the largest value of the first four batches.
TEST(PublicCalibrate, AutoChecksTheWholeModelOnHeldOutBatches) {
  qdeploy::CalibrationOptions opt;
  opt.algo = "auto";
  opt.held_out_batches = 2;
  auto cal = qdeploy::calibrate(model_bn(), pattern_source(6), opt);
  ASSERT_TRUE(cal) << cal.status().message();
  ASSERT_EQ(cal->auto_model_snr_db.size(), 5u);
  EXPECT_EQ(cal->auto_model_snr_db.front().first, "per-tensor");
  bool kept_is_candidate = false;
  for (const auto& [name, snr] : cal->auto_model_snr_db) {
    EXPECT_TRUE(std::isfinite(snr) || snr > 0) << name;
    kept_is_candidate |= name == cal->auto_kept;
  }
  EXPECT_TRUE(kept_is_candidate) << cal->auto_kept;
  opt.algo = "minmax";
  auto four = qdeploy::calibrate(model_bn(), pattern_source(6), opt);  // minmax ignores held_out_batches' check
  ASSERT_TRUE(four);
  EXPECT_TRUE(four->auto_model_snr_db.empty());
  EXPECT_FLOAT_EQ(four->scales.front().second, 1.f / 127.f);  // batch 3's max: batches 4 and 5 are held out
  opt.held_out_batches = 6;
  EXPECT_EQ(qdeploy::calibrate(model_bn(), pattern_source(6), opt).status().code(),
            qdeploy::StatusCode::kInvalidArgument);
}

TEST(PublicCalibrate, SourceFailuresAndBadOptionsAreErrors) {
  qdeploy::BatchSource broken = pattern_source(3);
  broken.batch = [](int k) -> qdeploy::Expected<qdeploy::TensorMap> {
    if (k == 1) return qdeploy::Status(qdeploy::StatusCode::kInvalidArgument, "camera 2 is unplugged");
    return pattern_source(3).batch(k);
  };
  qdeploy::CalibrationOptions opt;
  opt.algo = "minmax";
  auto r = qdeploy::calibrate(model_bn(), broken, opt);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("camera 2 is unplugged"), std::string::npos) << r.status().message();
  opt.algo = "median";
  EXPECT_EQ(qdeploy::calibrate(model_bn(), pattern_source(1), opt).status().code(),
            qdeploy::StatusCode::kInvalidArgument);
  EXPECT_EQ(qdeploy::calibrate(model_bn(), pattern_source(0)).status().code(), qdeploy::StatusCode::kInvalidArgument);
}

TEST(PublicSensitivity, NeedsScalesThenRanksEveryLayer) {
  auto none = qdeploy::sensitivity(model_bn(), pattern_source(2));
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("calib_cache"), std::string::npos);
  qdeploy::CalibrationOptions copt;
  copt.algo = "minmax";
  auto cal = qdeploy::calibrate(model_bn(), pattern_source(2), copt);
  ASSERT_TRUE(cal);
  const std::string path = test::temp_dir("public_quantize") + "/public_sens.cache";
  ASSERT_TRUE(cal->save(path));
  qdeploy::SensitivityOptions opt;
  opt.calib_cache = path;
  auto r = qdeploy::sensitivity(model_bn(), pattern_source(2), opt);
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->layers.size(), 5u);  // four convs, one Gemm
  EXPECT_EQ(r->ranking.size(), 5u);
  EXPECT_TRUE(std::isfinite(r->all_int8_snr));
  for (const auto& l : r->layers) {
    EXPECT_FALSE(std::isnan(l.snr_float)) << l.name;
    EXPECT_TRUE(std::isnan(l.snr_int8)) << l.name;  // that sweep was not asked for
  }
  std::remove(path.c_str());
}

TEST(PublicTopK, RanksTiesByClassIndex) {
  qdeploy::HostTensor logits(qdeploy::DataType::kFloat32, {3, 6});
  float* p = logits.data_as<float>();
  const float rows[3][6] = {{0, 5, 1, 1, 1, 1}, {2, 2, 0, 0, 0, 0}, {9, 8, 7, 6, 5, 4}};
  std::memcpy(p, rows, sizeof(rows));
  auto k = qdeploy::top_k(logits, {1, 1, 5});  // right; a tie lost to class 0 (top-5 still); rank 6
  ASSERT_TRUE(k) << k.status().message();
  EXPECT_EQ(k->count, 3);
  EXPECT_EQ(k->correct1, 1);
  EXPECT_EQ(k->correct5, 2);
  EXPECT_FALSE(qdeploy::top_k(logits, {1, 1}));
  EXPECT_FALSE(qdeploy::top_k(logits, {1, 1, 6}));
}

TEST(PublicSync, CpuContextsRefuseEventsAndSemaphores) {
  auto e = qdeploy::build(model_bn(), {});
  ASSERT_TRUE(e) << e.status().message();
  auto ctx = e->create_context();
  ASSERT_TRUE(ctx);
  ASSERT_TRUE((*ctx)->set_input_shapes({{"input", {1, 3, 32, 32}}}));
  qdeploy::HostTensor x(qdeploy::DataType::kFloat32, {1, 3, 32, 32});
  ASSERT_TRUE((*ctx)->upload({{"input", x}}, nullptr));
  int dummy = 0;
  qdeploy::ExternalSync sync;
  sync.signal_events.push_back(&dummy);
  qdeploy::Status st = (*ctx)->enqueue(nullptr, sync);
  EXPECT_EQ(st.code(), qdeploy::StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("CUDA engine"), std::string::npos) << st.message();
  EXPECT_TRUE((*ctx)->enqueue(nullptr, qdeploy::ExternalSync{}));  // nothing to wait for: a plain enqueue
  EXPECT_TRUE((*ctx)->download(nullptr));
  if (!qdeploy::has_cuda()) {
    EXPECT_EQ(qdeploy::ExternalSemaphore::import_fd(3, qdeploy::SemaphoreType::kOpaqueFd).status().code(),
              qdeploy::StatusCode::kUnsupported);
  }
  const std::string plan = test::temp_dir("public_quantize") + "/public_sync.plan";
  ASSERT_TRUE(e->save(plan));
  auto on_gpu = qdeploy::load(plan, 0);
  ASSERT_FALSE(on_gpu);
  EXPECT_NE(on_gpu.status().message().find("GPU plans only"), std::string::npos) << on_gpu.status().message();
  EXPECT_FALSE(qdeploy::load(plan, -1));
  std::remove(plan.c_str());
}

}  // namespace
}  // namespace qd
