// The GPU detect pipeline on a real CUDA engine (tasks/cuda/engine_detect.h: letterbox into the engine's input
// binding, the engine as a CUDA graph, batched NMS on its output buffer) against the CPU path on the same engine
// (Detector::detect: CPU letterbox, engine->run through the host, CPU NMS). The shipped YOLOv5n in fp16 on the four
// shipped sample scenes: the same detections, in the same order.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "backends/cuda/cuda_engine.h"
#include "backends/cuda/device.h"
#include "cuda/gpu_test.h"
#include "onnx/importer.h"
#include "tasks/cuda/engine_detect.h"
#include "tasks/detector.h"
#include "tasks/image_io.h"
#include "test_util.h"

namespace qd {
namespace {


std::vector<Image> sample_images() {
  std::vector<std::string> paths;
  for (const char* f : {"000001.jpg", "000002.jpg", "000003.jpg", "000004.jpg"}) {
    paths.push_back(test::source_dir() + "/models/samples/" + f);
  }
  auto imgs = read_images(paths);
  EXPECT_TRUE(imgs) << imgs.status().to_string();
  return imgs ? std::move(*imgs) : std::vector<Image>{};
}

std::unique_ptr<cuda::CudaEngine> yolo_engine(bool dynamic_batch, const std::string& precision = "fp16",
                                              std::vector<std::string> input_formats = {},
                                              std::vector<std::string> output_formats = {}) {
  auto g = import_onnx_file(test::source_dir() + "/models/yolov5n_fmnist_det.onnx");
  EXPECT_TRUE(g) << g.status().to_string();
  if (!g) return nullptr;
  if (dynamic_batch) {
    Value& x = g->values[g->inputs[0]];
    x.shape[0] = -1;
    x.dim_names = {"batch", "", "", ""};
  }
  BuildOptions opt;
  opt.timing_cache = test::shared_timing_cache();
  opt.device = "cuda";
  opt.precision = *parse_precision(precision);
  opt.input_formats = std::move(input_formats);
  opt.output_formats = std::move(output_formats);
  if (precision == "int8") opt.calib_cache = test::source_dir() + "/models/yolov5n_fmnist_det.cache";
  return test::cuda_engine_of(std::move(*g), opt);
}

// "" when equal: same count, classes and order per image, boxes within 1e-3 px, scores within 1e-6.
std::string compare(const std::vector<std::vector<Detection>>& want, const std::vector<std::vector<Detection>>& got) {
  std::ostringstream os;
  if (want.size() != got.size()) {
    os << want.size() << " images vs " << got.size();
    return os.str();
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].size() != got[i].size()) {
      os << "image " << i << ": " << want[i].size() << " detections on the CPU path, " << got[i].size() << " on the GPU";
      return os.str();
    }
    for (size_t k = 0; k < want[i].size(); ++k) {
      const Detection& a = want[i][k];
      const Detection& b = got[i][k];
      const float d = std::max({std::fabs(a.x1 - b.x1), std::fabs(a.y1 - b.y1), std::fabs(a.x2 - b.x2),
                                std::fabs(a.y2 - b.y2)});
      if (a.class_id != b.class_id || d > 1e-3f || std::fabs(a.score - b.score) > 1e-6f) {
        os << "image " << i << " detection " << k << ": CPU class " << a.class_id << " score " << a.score << " ["
           << a.x1 << ", " << a.y1 << ", " << a.x2 << ", " << a.y2 << "], GPU class " << b.class_id << " score "
           << b.score << " [" << b.x1 << ", " << b.y1 << ", " << b.x2 << ", " << b.y2 << "]";
        return os.str();
      }
    }
  }
  return "";
}

size_t total(const std::vector<std::vector<Detection>>& d) {
  size_t n = 0;
  for (const auto& v : d) n += v.size();
  return n;
}

// Runs the four samples through both paths in batches of `batch` (the CPU path with the same batches, so that the
// engine runs the same shapes) and compares.
void check_paths(cuda::CudaEngine& engine, const DetectorOptions& opt, int batch) {
  const std::vector<Image> imgs = sample_images();
  ASSERT_EQ(imgs.size(), 4u);
  std::vector<const Image*> ptrs;
  for (const Image& im : imgs) ptrs.push_back(&im);

  auto cpu_det = Detector::create(&engine, opt);
  ASSERT_TRUE(cpu_det) << cpu_det.status().to_string();
  std::vector<std::vector<Detection>> want;
  DetectTimings cpu_t;
  for (size_t start = 0; start < ptrs.size(); start += static_cast<size_t>(batch)) {
    const size_t end = std::min(ptrs.size(), start + static_cast<size_t>(batch));
    auto d = cpu_det->detect({ptrs.begin() + static_cast<std::ptrdiff_t>(start),
                              ptrs.begin() + static_cast<std::ptrdiff_t>(end)}, &cpu_t);
    ASSERT_TRUE(d) << d.status().to_string();
    for (auto& v : *d) {
      for (Detection& x : v) x.image = static_cast<int64_t>(want.size());
      want.push_back(std::move(v));
    }
  }

  auto gpu_det = Detector::create(&engine, opt);
  ASSERT_TRUE(gpu_det);
  EXPECT_EQ(cuda::engine_pipeline_unsupported(engine, *gpu_det), "");
  std::string why = "unset";
  auto pipe = cuda::attach_engine_pipeline(engine, *gpu_det, batch, &why);
  ASSERT_TRUE(pipe) << pipe.status().to_string();
  ASSERT_TRUE(*pipe) << why;
  EXPECT_EQ(why, "");
  ASSERT_TRUE(gpu_det->has_device_path());
  DetectTimings gpu_t;
  for (int rep = 0; rep < 2; ++rep) {  // the second pass replays the captured graphs
    auto got = gpu_det->detect(ptrs, &gpu_t);
    ASSERT_TRUE(got) << got.status().to_string();
    EXPECT_EQ(compare(want, *got), "") << "batch " << batch << ", pass " << rep;
  }
  EXPECT_GT(total(want), 0u);
  EXPECT_GT(gpu_t.infer_ms, 0.0);
  std::cout << "batch " << batch << ", " << total(want) << " detections; per image CPU path: preprocess "
            << cpu_t.preprocess_ms / 4 << " ms, inference " << cpu_t.infer_ms / 4 << " ms, postprocess "
            << cpu_t.postprocess_ms / 4 << " ms; GPU path: preprocess " << gpu_t.preprocess_ms / 8 << " ms, inference "
            << gpu_t.infer_ms / 8 << " ms, postprocess " << gpu_t.postprocess_ms / 8 << " ms\n";
}

DetectorOptions detect_options() {  // `qdeploy detect`'s defaults
  DetectorOptions o;
  o.post.conf_thres = 0.25f;
  o.post.iou_thres = 0.45f;
  o.post.max_det = 300;
  return o;
}

DetectorOptions eval_options() {  // `qdeploy eval`'s: low threshold, multi-label, val letterbox (many candidates)
  DetectorOptions o;
  o.letterbox.style = LetterboxStyle::kYoloV5Val;
  o.post.conf_thres = 0.001f;
  o.post.iou_thres = 0.65f;
  o.post.max_det = 300;
  o.post.multi_label = true;
  return o;
}

TEST(EngineDetectPipeline, YoloV5nFp16SamplesMatchTheCpuPath) {
  SKIP_WITHOUT_GPU();
  auto engine = yolo_engine(false);
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->inputs()[0].shape[0], 1);  // the shipped model has a fixed batch of 1
  check_paths(*engine, detect_options(), 1);
  check_paths(*engine, eval_options(), 1);
}

// An INT8 engine whose input binding is int8 NHWC (the preprocessing kernel quantizes the network input) and whose
// output binding is fp16: the GPU path against the CPU path (host letterbox, fp32 input quantized on upload, fp16
// output widened on the host). Same detections.
TEST(EngineDetectPipeline, Int8NhwcInputAndFp16OutputMatchTheCpuPath) {
  SKIP_WITHOUT_GPU();
  auto engine = yolo_engine(false, "int8", {"int8:nhwc"}, {"fp16"});
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->inputs()[0].dtype, DType::kInt8);
  ASSERT_EQ(engine->inputs()[0].layout, TensorLayout::kNHWC);
  ASSERT_GT(engine->inputs()[0].scale, 0.f);
  ASSERT_EQ(engine->outputs()[0].dtype, DType::kFloat16);
  check_paths(*engine, detect_options(), 1);
  check_paths(*engine, eval_options(), 1);
}

// Batches of 3 over 4 images: a full and a partial batch on one context (new shapes, graph recaptured).
TEST(EngineDetectPipeline, DynamicBatchMatchesTheCpuPath) {
  SKIP_WITHOUT_GPU();
  auto engine = yolo_engine(true);
  ASSERT_TRUE(engine);
  auto ctx = engine->create_context();
  if (!ctx->set_input_shapes({{engine->inputs()[0].name, {3, 3, 640, 640}}}).is_ok()) {
    GTEST_SKIP() << "the shipped model's graph does not take a batch of 3 (batch baked into a Reshape)";
  }
  check_paths(*engine, detect_options(), 3);
  check_paths(*engine, eval_options(), 3);
}

TEST(EngineDetectPipeline, RefusesBatchesTheEngineCannotTake) {
  SKIP_WITHOUT_GPU();
  auto engine = yolo_engine(false);
  ASSERT_TRUE(engine);
  auto det = Detector::create(engine.get(), detect_options());
  ASSERT_TRUE(det);
  EXPECT_FALSE(cuda::EngineDetectPipeline::create(*engine, *det, 0));  // bad max_batch
  EXPECT_FALSE(cuda::EngineDetectPipeline::create(*engine, *det, 2));  // the model's batch is fixed at 1
  EXPECT_FALSE(det->has_device_path());
}

}  // namespace
}  // namespace qd
