// Batched GPU YOLO post-processing (filter, sort, NMS, unletterbox) and the GPU detect pipeline against the CPU path
// (yolov5_postprocess + unletterbox_detections). The GPU keeps the CPU's candidate order and float arithmetic, so the
// detections must be identical, in the same order; on a mismatch the tests print the first difference.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "backends/cuda/device.h"
#include "core/half.h"
#include "cuda/gpu_test.h"
#include "tasks/cuda/detect_pipeline.h"
#include "tasks/cuda/detect_post.h"
#include "tasks/preprocess.h"
#include "tasks/yolo_decode.h"

namespace qd {
namespace {

struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(size_t n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~DeviceMem() { cudaFree(p); }
};

// How a random prediction tensor looks.
struct PredSpec {
  int n = 2;
  int64_t boxes = 2000;
  int nc = 8;
  int clusters = 12;       // boxes jitter around this many objects, so NMS has work to do
  float p_object = 0.3f;   // share of rows with a high objectness
  int one_class = -1;      // >= 0: only this class scores high
  float quantum = 1.f / 16;  // scores and coordinates are multiples of this: many exact ties
};

Tensor make_pred(const PredSpec& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  auto q = [&](float v) { return std::round(v / s.quantum) * s.quantum; };
  const int64_t row = 5 + s.nc;
  Tensor t(DType::kFloat32, {s.n, s.boxes, row});
  float* p = t.data<float>();
  for (int i = 0; i < s.n; ++i) {
    std::vector<std::array<float, 4>> objs(static_cast<size_t>(s.clusters));
    for (auto& o : objs) o = {q(u(rng) * 640), q(u(rng) * 640), q(8 + u(rng) * 200), q(8 + u(rng) * 200)};
    for (int64_t b = 0; b < s.boxes; ++b) {
      float* r = p + (i * s.boxes + b) * row;
      const auto& o = objs[rng() % objs.size()];
      for (int k = 0; k < 4; ++k) r[k] = q(o[k] + (u(rng) - 0.5f) * (k < 2 ? 12.f : 24.f));
      r[4] = u(rng) < s.p_object ? q(0.3f + 0.7f * u(rng)) : q(0.2f * u(rng));
      for (int c = 0; c < s.nc; ++c) {
        const bool hot = s.one_class < 0 ? u(rng) < 0.3f : c == s.one_class;
        r[5 + c] = hot ? q(0.2f + 0.8f * u(rng)) : q(0.05f * u(rng));
      }
    }
  }
  return t;
}

// The tensor as the GPU gets it (fp16: rounded), and the fp32 tensor the CPU reference sees (the same values).
struct Uploaded {
  std::unique_ptr<DeviceMem> mem;
  Tensor cpu_view;
};
Uploaded upload(const Tensor& pred, DType dtype) {
  Uploaded u;
  u.cpu_view = pred.clone();
  if (dtype == DType::kFloat16) {
    std::vector<uint16_t> h(static_cast<size_t>(pred.numel()));
    for (int64_t i = 0; i < pred.numel(); ++i) {
      h[i] = float_to_half(pred.data<float>()[i]);
      u.cpu_view.data<float>()[i] = half_to_float(h[i]);
    }
    u.mem = std::make_unique<DeviceMem>(h.size() * 2);
    EXPECT_EQ(cudaMemcpy(u.mem->p, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  } else {
    u.mem = std::make_unique<DeviceMem>(pred.nbytes());
    EXPECT_EQ(cudaMemcpy(u.mem->p, pred.raw(), pred.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  return u;
}

std::vector<std::vector<Detection>> cpu_reference(const Tensor& pred, const YoloPostprocessOptions& o,
                                                  const std::vector<LetterboxInfo>* infos) {
  auto r = yolov5_postprocess(pred, o);
  EXPECT_TRUE(r) << r.status().to_string();
  if (infos) {
    for (size_t i = 0; i < r->size(); ++i) EXPECT_TRUE(unletterbox_detections((*r)[i], (*infos)[i]).is_ok());
  }
  return *r;
}

std::string describe(const Detection& d) {
  std::ostringstream o;
  o.precision(9);
  o << "{img " << d.image << " cls " << d.class_id << " score " << d.score << " box " << d.x1 << "," << d.y1 << ","
    << d.x2 << "," << d.y2 << "}";
  return o.str();
}

// "" when identical (bitwise, in order), else the first difference.
std::string compare(const std::vector<std::vector<Detection>>& want, const std::vector<std::vector<Detection>>& got) {
  if (want.size() != got.size()) return "batch sizes differ";
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].size() != got[i].size()) {
      return "image " + std::to_string(i) + ": cpu keeps " + std::to_string(want[i].size()) + ", gpu " +
             std::to_string(got[i].size());
    }
    for (size_t k = 0; k < want[i].size(); ++k) {
      const Detection &a = want[i][k], &b = got[i][k];
      const bool same = std::memcmp(&a.x1, &b.x1, 5 * sizeof(float)) == 0 && a.class_id == b.class_id &&
                        a.image == b.image;
      if (!same) return "image " + std::to_string(i) + " #" + std::to_string(k) + ": cpu " + describe(a) + " gpu " + describe(b);
    }
  }
  return "";
}

size_t total(const std::vector<std::vector<Detection>>& d) {
  size_t n = 0;
  for (const auto& v : d) n += v.size();
  return n;
}

class GpuYoloPost : public test::GpuStreamTest {
 protected:
  // Runs pred through a fresh YoloPostprocessor (max_batch may exceed the batch) and the CPU; returns the GPU result.
  std::vector<std::vector<Detection>> check(const Tensor& pred, const YoloPostprocessOptions& o, DType dtype,
                                            const std::string& what, const std::vector<LetterboxInfo>* infos = nullptr,
                                            int max_batch = 0, int64_t max_candidates = 0) {
    const int n = static_cast<int>(pred.shape()[0]);
    cuda::YoloGpuConfig cfg;
    cfg.max_batch = max_batch > 0 ? max_batch : n;
    cfg.boxes = pred.shape()[1];
    cfg.num_classes = static_cast<int>(pred.shape()[2] - 5);
    cfg.dtype = dtype;
    cfg.post = o;
    cfg.max_candidates = max_candidates;
    auto post = cuda::YoloPostprocessor::create(cfg);
    EXPECT_TRUE(post) << post.status().to_string();
    if (!post) return {};
    const Uploaded up = upload(pred, dtype);
    auto got = (*post)->run(up.mem->p, n, infos ? infos->data() : nullptr, stream_);
    EXPECT_TRUE(got) << got.status().to_string();
    if (!got) return {};
    const auto want = cpu_reference(up.cpu_view, o, infos);
    EXPECT_EQ(compare(want, *got), "") << what;
    return *got;
  }
};

TEST_F(GpuYoloPost, RandomPredictionsMatchTheCpu) {
  uint32_t seed = 1;
  size_t kept = 0;
  int cases = 0;
  for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
    for (bool multi : {false, true}) {
      for (bool agnostic : {false, true}) {
        for (float conf : {0.001f, 0.25f}) {
          for (float iou : {0.45f, 0.7f}) {
            PredSpec s;
            s.n = 3;
            s.nc = multi ? 6 : 8;
            YoloPostprocessOptions o;
            o.multi_label = multi;
            o.agnostic = agnostic;
            o.conf_thres = conf;
            o.iou_thres = iou;
            const Tensor pred = make_pred(s, seed++);
            std::ostringstream what;
            what << dtype_name(dtype) << (multi ? " multi-label" : " best-class") << (agnostic ? " agnostic" : "")
                 << " conf " << conf << " iou " << iou;
            kept += total(check(pred, o, dtype, what.str()));
            ++cases;
          }
        }
      }
    }
  }
  std::cout << cases << " cases, " << kept << " detections kept, all identical to the CPU\n";
  EXPECT_GT(kept, 100u);
}

TEST_F(GpuYoloPost, Coco80ValSettings) {
  // val.py's settings on an 80-class output: conf 0.001, iou 0.6, multi-label, many candidates and ties.
  PredSpec s;
  s.n = 2;
  s.boxes = 6300;
  s.nc = 80;
  s.clusters = 30;
  YoloPostprocessOptions o;
  o.conf_thres = 0.001f;
  o.iou_thres = 0.6f;
  o.multi_label = true;
  check(make_pred(s, 99), o, DType::kFloat16, "coco80 val");
}

TEST_F(GpuYoloPost, MoreCandidatesThanTheNmsCapAndMaxDet) {
  PredSpec s;
  s.n = 2;
  s.boxes = 4000;
  s.p_object = 0.9f;
  YoloPostprocessOptions o;
  o.conf_thres = 0.01f;
  o.max_nms = 100;  // thousands of candidates, only the best 100 enter NMS
  check(make_pred(s, 3), o, DType::kFloat32, "max_nms 100");
  o.max_nms = 30000;
  o.max_det = 3;
  o.multi_label = true;
  const auto got = check(make_pred(s, 4), o, DType::kFloat32, "max_det 3");
  for (const auto& v : got) EXPECT_EQ(v.size(), 3u);
}

TEST_F(GpuYoloPost, NoCandidates) {
  PredSpec s;
  s.p_object = 0.f;  // objectness < 0.2 everywhere
  YoloPostprocessOptions o;
  o.conf_thres = 0.25f;
  const auto got = check(make_pred(s, 5), o, DType::kFloat32, "no candidates");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].empty());
  EXPECT_TRUE(got[1].empty());
}

TEST_F(GpuYoloPost, AllCandidatesOneClass) {
  PredSpec s;
  s.one_class = 5;
  s.p_object = 0.8f;
  for (bool multi : {false, true}) {
    YoloPostprocessOptions o;
    o.multi_label = multi;
    o.conf_thres = 0.1f;
    const auto got = check(make_pred(s, 6), o, DType::kFloat32, multi ? "one class, multi" : "one class");
    for (const auto& v : got) {
      for (const Detection& d : v) EXPECT_EQ(d.class_id, 5);
    }
  }
}

TEST_F(GpuYoloPost, HandMadeTiesAndThresholds) {
  // Rows: cx, cy, w, h, obj, cls0, cls1. Boxes 0 and 1: IoU exactly 0.5 (= iou_thres: not suppressed, strictly >).
  // Boxes 2 and 3: the same score as box 0 (a tie: row order decides). Box 4: IoU 0.64 with box 0: suppressed.
  // Box 5: class 1 over box 0: kept (class-aware). Box 6: below conf.
  const std::vector<std::array<float, 7>> rows = {
      {5, 5, 10, 10, 1.0f, 0.5f, 0.0f},      // [0,0,10,10], score 0.5
      {5, 2.5f, 10, 5, 1.0f, 0.4f, 0.0f},    // [0,0,10,5]: inter 50 / union 100 = 0.5
      {105, 5, 10, 10, 0.5f, 1.0f, 0.0f},    // score 0.5, far away
      {205, 5, 10, 10, 1.0f, 0.5f, 0.0f},    // score 0.5, far away
      {5, 5, 8, 8, 1.0f, 0.45f, 0.0f},       // [1,1,9,9]: 64 / 100
      {5, 5, 10, 10, 1.0f, 0.0f, 0.3f},      // class 1
      {300, 300, 10, 10, 0.1f, 1.0f, 0.0f},  // obj 0.1 < conf
  };
  Tensor pred(DType::kFloat32, {1, static_cast<int64_t>(rows.size()), 7});
  for (size_t r = 0; r < rows.size(); ++r) std::memcpy(pred.data<float>() + r * 7, rows[r].data(), 7 * sizeof(float));
  YoloPostprocessOptions o;
  o.conf_thres = 0.2f;
  o.iou_thres = 0.5f;
  const auto got = check(pred, o, DType::kFloat32, "hand-made");
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size(), 5u);
  EXPECT_FLOAT_EQ(got[0][0].x1, 0.f);    // box 0 (score 0.5, first row among the ties)
  EXPECT_FLOAT_EQ(got[0][1].x1, 100.f);  // box 2
  EXPECT_FLOAT_EQ(got[0][2].x1, 200.f);  // box 3
  EXPECT_FLOAT_EQ(got[0][3].score, 0.4f);
  EXPECT_EQ(got[0][4].class_id, 1);
}

TEST_F(GpuYoloPost, MapsBoxesThroughTheLetterbox) {
  PredSpec s;
  s.n = 4;
  const Tensor pred = make_pred(s, 8);
  std::vector<LetterboxInfo> infos;
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{810, 1080}, {1920, 1080}, {640, 427}, {33, 900}}) {
    LetterboxInfo info;
    const LetterboxOptions lb = infos.size() == 3 ? cudla_letterbox_options() : LetterboxOptions{};
    info = plan_letterbox(w, h, lb)->info;
    infos.push_back(info);
  }
  YoloPostprocessOptions o;
  check(pred, o, DType::kFloat32, "letterbox", &infos);
  check(pred, o, DType::kFloat16, "letterbox fp16", &infos);
}

TEST_F(GpuYoloPost, ImagesBeyondTheInBlockSortTakeTheSortedPath) {
  // Up to 16,384 candidates an image is sorted in shared memory; beyond, CUB sorts it in a second round trip. Image 0
  // has ~20,000 candidates at conf 0.001 (12,000 rows x 3 classes, objectness >= 0.3 everywhere), image 1 about
  // 10,000 (sorted in shared memory, boxes in global memory), image 2 none, image 3 about a thousand (boxes in shared
  // memory too): every path in one batch, with fp16 ties, multi-label and best-class.
  PredSpec s;
  s.n = 4;
  s.boxes = 12000;
  s.nc = 3;
  s.p_object = 1.f;
  Tensor pred = make_pred(s, 21);
  float* p = pred.data<float>();
  const int64_t row = 5 + s.nc;
  for (int64_t b = 0; b < s.boxes; ++b) {
    if (b % 2) p[(s.boxes + b) * row + 4] = 0.f;       // image 1: one row in 2 left
    p[(2 * s.boxes + b) * row + 4] = 0.f;              // image 2: nothing
    if (b % 20) p[(3 * s.boxes + b) * row + 4] = 0.f;  // image 3: one row in 20 left
  }
  auto candidates = [&](int img) {
    int64_t n = 0;
    for (int64_t b = 0; b < s.boxes; ++b) {
      const float* r = p + (img * s.boxes + b) * row;
      for (int c = 0; c < s.nc; ++c) n += r[4] * r[5 + c] > 0.001f;
    }
    return n;
  };
  ASSERT_GT(candidates(0), 16384) << "image 0 must be beyond the in-block sort";
  ASSERT_GT(candidates(1), 7000) << "image 1 must sort in shared memory with its boxes in global memory";
  ASSERT_LT(candidates(1), 16000);
  ASSERT_LT(candidates(3), 6000) << "image 3 must keep its boxes in shared memory";
  YoloPostprocessOptions o;
  o.conf_thres = 0.001f;
  o.multi_label = true;
  check(pred, o, DType::kFloat16, "mixed paths, multi-label");
  o.multi_label = false;
  o.max_nms = 20000;
  check(pred, o, DType::kFloat32, "best-class");
}

TEST_F(GpuYoloPost, CandidateCapOverflowFallsBackToTheCpu) {
  PredSpec s;
  s.n = 3;
  s.p_object = 0.6f;
  YoloPostprocessOptions o;
  o.conf_thres = 0.05f;
  o.multi_label = true;
  // 16 slots per image: every image overflows and is redone on the CPU from the device tensor; same result.
  check(make_pred(s, 9), o, DType::kFloat16, "cap 16", nullptr, 0, 16);
  // A cap near the candidate count (tens per image at conf 0.3): images on both sides of it, in one batch.
  s.p_object = 0.02f;
  o.conf_thres = 0.3f;
  check(make_pred(s, 10), o, DType::kFloat32, "cap 60", nullptr, 0, 60);
}

TEST_F(GpuYoloPost, SmallerBatchesAndReuse) {
  PredSpec s;
  s.n = 8;
  const Tensor pred = make_pred(s, 12);
  YoloPostprocessOptions o;
  cuda::YoloGpuConfig cfg;
  cfg.max_batch = 8;
  cfg.boxes = s.boxes;
  cfg.num_classes = s.nc;
  cfg.post = o;
  auto post = cuda::YoloPostprocessor::create(cfg);
  ASSERT_TRUE(post) << post.status().to_string();
  const Uploaded up = upload(pred, DType::kFloat32);
  const auto want = cpu_reference(pred, o, nullptr);
  const int64_t image_floats = s.boxes * (5 + s.nc);
  for (int n : {8, 1, 3, 8}) {
    for (int start = 0; start + n <= 8; start += n) {
      const float* d = static_cast<const float*>(up.mem->p) + start * image_floats;
      auto got = (*post)->run(d, n, nullptr, stream_);
      ASSERT_TRUE(got) << got.status().to_string();
      ASSERT_EQ(got->size(), static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        std::vector<Detection> w = want[static_cast<size_t>(start + i)];
        for (Detection& x : w) x.image = i;  // the GPU numbers images within its batch
        EXPECT_EQ(compare({w}, {(*got)[static_cast<size_t>(i)]}), "") << "n " << n << " image " << start + i;
      }
    }
  }
}

TEST_F(GpuYoloPost, Errors) {
  cuda::YoloGpuConfig cfg;
  cfg.boxes = 10;
  cfg.num_classes = 0;
  EXPECT_FALSE(cuda::YoloPostprocessor::create(cfg));
  cfg.num_classes = 2;
  cfg.post.iou_thres = 2.f;
  EXPECT_FALSE(cuda::YoloPostprocessor::create(cfg));
  cfg.post.iou_thres = 0.5f;
  cfg.dtype = DType::kInt8;
  EXPECT_FALSE(cuda::YoloPostprocessor::create(cfg));
  cfg.dtype = DType::kFloat32;
  cfg.max_batch = 2;
  auto post = cuda::YoloPostprocessor::create(cfg);
  ASSERT_TRUE(post) << post.status().to_string();
  DeviceMem pred(2 * 10 * 7 * sizeof(float));
  ASSERT_EQ(cudaMemset(pred.p, 0, 2 * 10 * 7 * sizeof(float)), cudaSuccess);
  EXPECT_FALSE((*post)->enqueue(pred.p, 3, nullptr, stream_));  // above max_batch
  EXPECT_FALSE((*post)->collect());                             // nothing enqueued
  LetterboxInfo bad;
  bad.scale = 0.f;
  bad.orig_w = bad.orig_h = 10;
  EXPECT_FALSE((*post)->enqueue(pred.p, 1, &bad, stream_));
  ASSERT_TRUE((*post)->enqueue(pred.p, 2, nullptr, stream_).is_ok());
  EXPECT_FALSE((*post)->enqueue(pred.p, 2, nullptr, stream_));  // not collected yet
  auto got = (*post)->collect();
  ASSERT_TRUE(got);
  EXPECT_EQ(total(*got), 0u);
}

// The whole GPU pipeline with a stand-in for the engine: it checks that the device input equals the CPU's
// preprocessing and returns a prepared prediction tensor. Batches of 2 over 5 images.
TEST_F(GpuYoloPost, DetectPipelineMatchesTheCpuPath) {
  std::mt19937 rng(21);
  std::vector<Image> imgs;
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{810, 1080}, {640, 480}, {1280, 720}, {50, 90}, {333, 333}}) {
    Image im(w, h);
    for (auto& b : im.data) b = static_cast<uint8_t>(rng() & 255);
    imgs.push_back(std::move(im));
  }
  std::vector<const Image*> ptrs;
  for (const Image& im : imgs) ptrs.push_back(&im);
  PredSpec s;
  s.n = 5;
  const Tensor pred = make_pred(s, 13);
  const Uploaded up = upload(pred, DType::kFloat32);

  cuda::DetectPipeline::Config cfg;
  cfg.detector.letterbox.width = cfg.detector.letterbox.height = 320;
  cfg.detector.post.conf_thres = 0.1f;
  cfg.max_batch = 2;
  cfg.boxes = s.boxes;
  cfg.num_classes = s.nc;
  // CPU path: letterbox + tensor, then post-processing + unletterbox.
  std::vector<LetterboxInfo> infos;
  std::vector<Image> boxed;
  for (const Image& im : imgs) {
    LetterboxInfo info;
    boxed.push_back(*letterbox(im, cfg.detector.letterbox, &info));
    infos.push_back(info);
  }
  std::vector<const Image*> boxed_ptrs;
  for (const Image& b : boxed) boxed_ptrs.push_back(&b);
  const Tensor input = *images_to_tensor(boxed_ptrs, cfg.tensor);
  const auto want = cpu_reference(pred, cfg.detector.post, &infos);

  int next = 0;  // first image of the batch the stand-in engine is given
  int input_mismatches = 0;
  const int64_t per_image_in = input.numel() / 5, per_image_pred = s.boxes * (5 + s.nc);
  cuda::DetectPipeline::InferFn infer = [&](void* d_input, int n, cudaStream_t st) -> Expected<const void*> {
    std::vector<float> got(static_cast<size_t>(n * per_image_in));
    if (cudaMemcpyAsync(got.data(), d_input, got.size() * 4, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
        cudaStreamSynchronize(st) != cudaSuccess) {
      return internal("copy failed");
    }
    if (std::memcmp(got.data(), input.data<float>() + next * per_image_in, got.size() * 4) != 0) ++input_mismatches;
    const void* p = static_cast<const float*>(up.mem->p) + next * per_image_pred;
    next += n;
    return p;
  };
  auto pipe = cuda::DetectPipeline::create(cfg, infer, stream_);
  ASSERT_TRUE(pipe) << pipe.status().to_string();
  DetectTimings t;
  auto got = (*pipe)->detect(ptrs, &t);
  ASSERT_TRUE(got) << got.status().to_string();
  EXPECT_EQ(next, 5);
  EXPECT_EQ(input_mismatches, 0);
  EXPECT_EQ(compare(want, *got), "");
  EXPECT_GT(total(*got), 0u);
  EXPECT_GE(t.preprocess_ms, 0.0);
}

}  // namespace
}  // namespace qd
