// The fused GPU preprocessing kernel against the CPU path (letterbox() + images_to_tensor()): every letterbox style,
// many sizes and aspect ratios, both layouts, both channel orders, fp32 / fp16 / int8. The kernel executes the same
// plans with the same arithmetic, so the outputs must be identical byte for byte; on a mismatch the tests print where.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "backends/cuda/device.h"
#include "cuda/gpu_test.h"
#include "tasks/cuda/preprocess.h"
#include "tasks/preprocess.h"

namespace qd {
namespace {

Image random_image(int w, int h, std::mt19937& rng) {
  Image img(w, h);
  // Smooth gradients plus noise: resampling errors show up both in flat and in busy regions.
  const int fx = 1 + static_cast<int>(rng() % 7), fy = 1 + static_cast<int>(rng() % 7);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = img.pixel(x, y);
      for (int c = 0; c < 3; ++c) {
        const int v = (x * fx + y * fy + c * 40) % 256 + static_cast<int>(rng() % 24) - 12;
        p[c] = static_cast<uint8_t>(std::min(255, std::max(0, v)));
      }
    }
  }
  return img;
}

struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(size_t n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~DeviceMem() { cudaFree(p); }
};

// The CPU reference: letterbox each image, then pack.
Tensor cpu_tensor(const std::vector<const Image*>& imgs, const LetterboxOptions& lb, const TensorOptions& t,
                  std::vector<LetterboxInfo>* infos) {
  std::vector<Image> boxed;
  infos->clear();
  for (const Image* im : imgs) {
    LetterboxInfo info;
    auto b = letterbox(*im, lb, &info);
    EXPECT_TRUE(b) << b.status().to_string();
    boxed.push_back(*b);
    infos->push_back(info);
  }
  std::vector<const Image*> ptrs;
  for (const Image& b : boxed) ptrs.push_back(&b);
  auto x = images_to_tensor(ptrs, t);
  EXPECT_TRUE(x) << x.status().to_string();
  return *x;
}

// Runs the GPU preprocessor (one object reused across calls, as the pipeline does) and downloads the result.
Tensor gpu_tensor(cuda::ImagePreprocessor& pre, const std::vector<const Image*>& imgs, cudaStream_t stream,
                  std::vector<LetterboxInfo>* infos) {
  const int n = static_cast<int>(imgs.size());
  DeviceMem out(pre.output_bytes(n));
  const Status s = pre.run(imgs, out.p, stream, infos);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  Tensor t(pre.tensor_options().dtype, pre.output_shape(n));
  EXPECT_EQ(cudaMemcpyAsync(t.raw(), out.p, t.nbytes(), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return t;
}

// Element-wise comparison; returns "" when identical, else the count and the first mismatches with their positions.
std::string compare(const Tensor& want, const Tensor& got, TensorLayout layout) {
  if (want.shape() != got.shape() || want.dtype() != got.dtype()) return "shape or dtype differ";
  const size_t esize = dtype_size(want.dtype());
  const auto* a = static_cast<const uint8_t*>(want.raw());
  const auto* b = static_cast<const uint8_t*>(got.raw());
  const Shape& s = want.shape();
  int64_t bad = 0;
  double max_diff = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (std::memcmp(a + i * esize, b + i * esize, esize) == 0) continue;
    const double va = want.get_f64(i), vb = got.get_f64(i);
    max_diff = std::max(max_diff, std::fabs(va - vb));
    if (bad++ < 5) {
      int64_t n, c, y, x;
      if (layout == TensorLayout::kNCHW) {
        x = i % s[3], y = i / s[3] % s[2], c = i / (s[2] * s[3]) % 3, n = i / (3 * s[2] * s[3]);
      } else {
        c = i % 3, x = i / 3 % s[2], y = i / (3 * s[2]) % s[1], n = i / (3 * s[1] * s[2]);
      }
      first << " [n" << n << " c" << c << " y" << y << " x" << x << ": cpu " << va << " gpu " << vb << "]";
    }
  }
  if (bad == 0) return "";
  std::ostringstream o;
  o << bad << " of " << want.numel() << " values differ (max |diff| " << max_diff << "):" << first.str();
  return o.str();
}

void expect_same_infos(const std::vector<LetterboxInfo>& a, const std::vector<LetterboxInfo>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(&a[i], &b[i], sizeof(LetterboxInfo))) << "letterbox info of image " << i;
  }
}

class GpuPreprocess : public test::GpuStreamTest {
 protected:
  // One batch through both paths; checks the tensors and the letterbox geometry.
  void check(const std::vector<const Image*>& imgs, const LetterboxOptions& lb, const TensorOptions& t,
             const std::string& what) {
    auto pre = cuda::ImagePreprocessor::create(lb, t);
    ASSERT_TRUE(pre) << pre.status().to_string();
    std::vector<LetterboxInfo> cpu_infos, gpu_infos;
    const Tensor want = cpu_tensor(imgs, lb, t, &cpu_infos);
    const Tensor got = gpu_tensor(**pre, imgs, stream_, &gpu_infos);
    const std::string diff = compare(want, got, t.layout);
    EXPECT_EQ(diff, "") << what;
    expect_same_infos(cpu_infos, gpu_infos);
    ++checked_;
  }
  int checked_ = 0;
};

// The resampled bytes themselves (divisor 1, NHWC fp32: the tensor holds the letterboxed pixels), over random sizes
// and every style, with each image alone so that a mismatch names the size.
TEST_F(GpuPreprocess, PixelsMatchTheCpuForEveryStyle) {
  std::mt19937 rng(7);
  TensorOptions raw;
  raw.divisor = 1.f;
  raw.layout = TensorLayout::kNHWC;
  std::vector<std::pair<int, int>> sizes = {{1, 1},     {1, 37},    {53, 1},    {2, 2},     {640, 640}, {1280, 1280},
                                            {1280, 720}, {720, 1280}, {810, 1080}, {1920, 1080}, {640, 427}, {1, 900},
                                            {147, 100}, {1050, 333}, {3000, 40}, {333, 3333}};
  for (int i = 0; i < 24; ++i) sizes.push_back({1 + static_cast<int>(rng() % 1500), 1 + static_cast<int>(rng() % 1500)});
  std::vector<LetterboxOptions> styles;
  {
    LetterboxOptions u;  // ultralytics 640
    styles.push_back(u);
    u.width = 512, u.height = 320;  // rectangular
    styles.push_back(u);
    u.width = u.height = 320, u.scaleup = false;
    styles.push_back(u);
    LetterboxOptions v;
    v.style = LetterboxStyle::kYoloV5Val;
    styles.push_back(v);
    v.width = v.height = 320;
    styles.push_back(v);
    styles.push_back(cudla_letterbox_options());
    LetterboxOptions d = cudla_letterbox_options();
    d.width = 352, d.height = 288, d.fit_width = 320, d.fit_height = 256, d.pad_value = 0;
    styles.push_back(d);
  }
  for (const auto& [w, h] : sizes) {
    const Image img = random_image(w, h, rng);
    for (size_t s = 0; s < styles.size(); ++s) {
      check({&img}, styles[s], raw, "image " + std::to_string(w) + "x" + std::to_string(h) + ", style #" +
                                        std::to_string(s));
    }
  }
  std::cout << "compared " << checked_ << " image x style cases byte for byte\n";
}

// A mixed batch through every layout / order / dtype combination, with ImageNet-style normalization and /255.
TEST_F(GpuPreprocess, TensorsMatchForEveryLayoutOrderAndDtype) {
  std::mt19937 rng(11);
  std::vector<Image> imgs;
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{640, 480}, {300, 700}, {1280, 720}, {97, 61}, {1, 1}}) {
    imgs.push_back(random_image(w, h, rng));
  }
  std::vector<const Image*> batch;
  for (const Image& im : imgs) batch.push_back(&im);
  for (const LetterboxOptions& lb : {LetterboxOptions{}, cudla_letterbox_options()}) {
    for (TensorLayout layout : {TensorLayout::kNCHW, TensorLayout::kNHWC}) {
      for (ChannelOrder order : {ChannelOrder::kRGB, ChannelOrder::kBGR}) {
        for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt8}) {
          for (bool imagenet : {false, true}) {
            TensorOptions t;
            t.layout = layout;
            t.order = order;
            t.dtype = dtype;
            if (imagenet) {
              t.mean = {0.485f, 0.456f, 0.406f};
              t.stddev = {0.229f, 0.224f, 0.225f};
            }
            // An input scale as calibration would give (amax / 127), so that int8 values use the whole range.
            t.int8_scale = imagenet ? 2.64f / 127.f : 1.f / 127.f;
            std::ostringstream what;
            what << (lb.style == LetterboxStyle::kCuDLA ? "cudla" : "ultralytics") << " "
                 << (layout == TensorLayout::kNCHW ? "NCHW" : "NHWC") << " "
                 << (order == ChannelOrder::kRGB ? "RGB" : "BGR") << " " << dtype_name(dtype)
                 << (imagenet ? " imagenet" : " /255");
            check(batch, lb, t, what.str());
          }
        }
      }
    }
  }
}

// One preprocessor over batches of growing and shrinking total size: the staging memory is reused and regrown while
// earlier batches may still be in flight on the stream.
TEST_F(GpuPreprocess, StagingIsReusedAcrossBatches) {
  std::mt19937 rng(5);
  LetterboxOptions lb;
  lb.width = lb.height = 320;
  TensorOptions t;
  t.dtype = DType::kFloat16;
  auto pre = cuda::ImagePreprocessor::create(lb, t);
  ASSERT_TRUE(pre) << pre.status().to_string();
  const std::vector<int> counts = {1, 8, 2, 16, 3};
  for (size_t round = 0; round < counts.size(); ++round) {
    std::vector<Image> imgs;
    for (int i = 0; i < counts[round]; ++i) {
      imgs.push_back(random_image(1 + static_cast<int>(rng() % 1200), 1 + static_cast<int>(rng() % 1200), rng));
    }
    std::vector<const Image*> batch;
    for (const Image& im : imgs) batch.push_back(&im);
    std::vector<LetterboxInfo> cpu_infos, gpu_infos;
    const Tensor want = cpu_tensor(batch, lb, t, &cpu_infos);
    const Tensor got = gpu_tensor(**pre, batch, stream_, &gpu_infos);
    EXPECT_EQ(compare(want, got, t.layout), "") << "round " << round;
    expect_same_infos(cpu_infos, gpu_infos);
  }
}

TEST(GpuPreprocessErrors, BadInputIsAnError) {
  SKIP_WITHOUT_GPU();
  TensorOptions t;
  t.dtype = DType::kInt8;  // no scale
  EXPECT_FALSE(cuda::ImagePreprocessor::create(LetterboxOptions{}, t));
  LetterboxOptions val;
  val.style = LetterboxStyle::kYoloV5Val;
  val.height = 320;
  EXPECT_FALSE(cuda::ImagePreprocessor::create(val, TensorOptions{}));
  auto pre = cuda::ImagePreprocessor::create(LetterboxOptions{}, TensorOptions{});
  ASSERT_TRUE(pre);
  DeviceMem out((*pre)->output_bytes(2));
  const Image ok(4, 4), empty;
  EXPECT_FALSE((*pre)->run({}, out.p, nullptr));
  EXPECT_FALSE((*pre)->run({&ok, &empty}, out.p, nullptr));
  EXPECT_TRUE((*pre)->run({&ok, &ok}, out.p, nullptr).is_ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace qd
