// Detector::set_device_path: detect() goes through the given function (the hook the GPU pipeline plugs into), and
// back to the CPU path when it is cleared.
#include <gtest/gtest.h>

#include "tasks/detector.h"

namespace qd {
namespace {

// An engine with a YOLOv5-shaped interface that returns no detections (all zeros) and counts its runs.
class FakeYoloEngine : public Engine {
 public:
  FakeYoloEngine() {
    in_ = {{"images", DType::kFloat32, {1, 3, 64, 64}}};
    out_ = {{"output0", DType::kFloat32, {1, 12, 7}}};
  }
  const std::vector<TensorDesc>& inputs() const override { return in_; }
  const std::vector<TensorDesc>& outputs() const override { return out_; }
  std::string describe() const override { return "fake"; }
  Expected<std::vector<Tensor>> run(const std::map<std::string, Tensor>&) override {
    ++runs;
    return std::vector<Tensor>{Tensor(DType::kFloat32, {1, 12, 7})};
  }
  Status save(const std::string&) const override { return unsupported("fake"); }
  const BuildOptions& options() const override { return opt_; }
  const std::map<std::string, Shape>& build_shapes() const override { return shapes_; }
  int runs = 0;

 private:
  std::vector<TensorDesc> in_, out_;
  BuildOptions opt_;
  std::map<std::string, Shape> shapes_;
};

TEST(DetectorDevicePath, RoutesDetectThroughTheHook) {
  FakeYoloEngine engine;
  auto det = Detector::create(&engine, DetectorOptions{});
  ASSERT_TRUE(det) << det.status().to_string();
  EXPECT_EQ(det->num_classes(), 2);
  EXPECT_FALSE(det->raw_heads());
  EXPECT_EQ(det->options().letterbox.width, 64);  // resolved from the model's input
  const Image img(10, 20, 7);
  auto cpu = det->detect({&img});
  ASSERT_TRUE(cpu) << cpu.status().to_string();
  EXPECT_EQ(engine.runs, 1);
  EXPECT_FALSE(det->has_device_path());

  int calls = 0;
  det->set_device_path([&](const std::vector<const Image*>& images, DetectTimings* t) {
    ++calls;
    if (t) t->infer_ms += 1;
    Detection d;
    d.score = 0.5f;
    return Expected<std::vector<std::vector<Detection>>>(std::vector<std::vector<Detection>>(images.size(), {d}));
  });
  EXPECT_TRUE(det->has_device_path());
  DetectTimings t;
  auto dev = det->detect({&img, &img}, &t);
  ASSERT_TRUE(dev);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(engine.runs, 1);  // the engine was not run by the CPU path
  ASSERT_EQ(dev->size(), 2u);
  EXPECT_FLOAT_EQ((*dev)[1][0].score, 0.5f);
  EXPECT_DOUBLE_EQ(t.infer_ms, 1.0);
  // preprocess() stays on the CPU (calibration relies on it).
  std::vector<LetterboxInfo> infos;
  EXPECT_TRUE(det->preprocess({&img}, &infos));
  EXPECT_EQ(calls, 1);

  det->set_device_path(nullptr);
  EXPECT_FALSE(det->has_device_path());
  ASSERT_TRUE(det->detect({&img}));
  EXPECT_EQ(engine.runs, 2);
}

}  // namespace
}  // namespace qd

namespace qd {
namespace {

TEST(DetectTimings, FormatsPerImageAndPerBatchWithTheShare) {
  DetectTimings t;
  t.images = 32;
  t.batches = 2;
  t.preprocess_ms = 3.2;  // 0.1 ms per image
  t.infer_ms = 64;
  t.postprocess_ms = 3.2;
  std::string s = format_timings(t, 16);
  EXPECT_NE(s.find("per image (32): decode 0.500 ms, preprocess 0.100 ms, inference 2.000 ms, postprocess 0.100 ms"),
            std::string::npos) << s;
  EXPECT_NE(s.find("per batch (2, 16.0 images each): decode 8.000 ms"), std::string::npos) << s;
  EXPECT_NE(s.find("pre- + post-processing: 10.0% of inference\n"), std::string::npos) << s;
  EXPECT_EQ(s.find("upload"), std::string::npos) << "the CPU path times no copies apart";
  t.upload_ms = 6.4;
  t.download_ms = 0.32;
  s = format_timings(t, 16);
  EXPECT_NE(s.find("upload 0.200 ms, preprocess 0.100 ms, inference 2.000 ms, postprocess 0.100 ms, download 0.010 ms"),
            std::string::npos) << s;
  EXPECT_NE(s.find("10.0% of inference (20.5% with the copies)"), std::string::npos) << s;
}

}  // namespace
}  // namespace qd
