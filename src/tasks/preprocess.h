// Image preprocessing for CNN inputs: OpenCV-compatible resampling, YOLO letterboxing, and packing into tensors.
//
// This is the CPU reference. The fused GPU kernel (tasks/cuda/preprocess.h) produces the same bytes (resampling)
// and the same tensor values: both execute the plans and the value table defined below, and every formula is spelled
// out here. Resampling matches OpenCV 4.6 bit for bit (checked on 832 random sizes for INTER_LINEAR / INTER_AREA and
// on the cuDLA warpAffine), which is what makes mAP numbers comparable with the Python pipelines these styles come
// from.
//
// Coordinates: pixel (x, y) covers [x, x+1) x [y, y+1); its centre is (x + 0.5, y + 0.5). Images are RGB.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "tasks/detection.h"
#include "tasks/image_io.h"

namespace qd {

// ---------------------------------------------------------------- resampling
// Both reproduce OpenCV 4.x cv::resize on 8-bit 3-channel images bit for bit (checked against OpenCV 4.6).
//
// resize_linear == cv::INTER_LINEAR. Source coordinate of output column dx (rows alike, in single precision):
//   scale = 1.0 / (double(dst_w) / src_w)  (in double, exactly so: src_w / dst_w can differ in the last bit)
//   f = float((dx + 0.5) * scale - 0.5);  sx = floor(f);  a = f - sx;
//   columns: if sx < 0 {sx = 0, a = 0};  if sx >= src_w - 1 {sx = src_w - 1, a = 0}  (rows: not clamped here; the two
//   source rows sy, sy+1 are each clamped to [0, src_h-1])
//   weights: w0 = round_half_even((1 - a) * 2048), w1 = round_half_even(a * 2048)   (11-bit fixed point)
//   horizontal: h = S[sx] * w0 + S[sx+1] * w1   (int32; S[sx] * 2048 alone when sx == src_w - 1)
//   vertical: v = ((h0 >> 4) * b0 >> 16) + ((h1 >> 4) * b1 >> 16);  out = clamp((v + 2) >> 2, 0, 255)
//     (b0, b1: the row weights, from the unclamped row fraction; >> is an arithmetic shift)
// An exact 2x shrink in both directions is an area average instead (OpenCV does the same): (a + b + c + d + 2) >> 2.
Expected<Image> resize_linear(const Image& src, int width, int height);
// resize_area == cv::INTER_AREA when shrinking (area-weighted average, float weights, round half to even);
// enlarging falls back to resize_linear (OpenCV uses a different kernel there; nothing here needs it).
Expected<Image> resize_area(const Image& src, int width, int height);

// ---------------------------------------------------------------- letterbox
enum class LetterboxStyle {
  // ultralytics letterbox(img, (height, width), auto=False, scaleup=scaleup), in double precision like Python:
  //   r = min(H / h, W / w) (and min(r, 1) without scaleup); uw = round_half_even(w * r), uh = round_half_even(h * r)
  //   dw = (W - uw) / 2.0, dh = (H - uh) / 2.0   (multiples of 0.5)
  //   left = round_half_even(dw - 0.1), right = round_half_even(dw + 0.1); top/bottom alike from dh
  //   resize_linear to uw x uh (only if that differs from w x h), then pad with pad_value.
  kUltralytics,
  // ultralytics YOLOv5 val.py for a fixed-shape model (rect=False): load_image() first resizes so the long side is
  // `width` (ceil of w*r, h*r; INTER_AREA when shrinking, INTER_LINEAR when enlarging), then letterbox(scaleup=False).
  // Needs width == height.
  kYoloV5Val,
  // NVIDIA cuDLA-samples (yolov5 on DLA): cv::warpAffine with INTER_LINEAR and a constant border, scaling the image
  // to fit fit_width x fit_height and centring it on width x height (640 in 672x672). Their arithmetic (float32):
  //   s = min(fit_w / w, fit_h / h);  tx = float(-(s * w) * 0.5 + fit_w * 0.5 + s * 0.5 - 0.5 + (W - fit_w) / 2)
  // then OpenCV's warpAffine: inverse map in double; per output pixel the source position in 1/32 pixel fixed point
  //   X = (round((m01*y + m02) * 1024) + 16 + round(m00 * x * 1024)) >> 5;  sx = X >> 5, fx = X & 31 (Y alike)
  //   out = (sum of the 4 taps * (32-fy|fy) * (32-fx|fx) * 32 + 16384) >> 15, taps outside the image = pad_value.
  // So edge pixels blend with the pad value, as warpAffine does.
  kCuDLA,
};

struct LetterboxOptions {
  LetterboxStyle style = LetterboxStyle::kUltralytics;
  int width = 640;  // output (network input) size
  int height = 640;
  bool scaleup = true;  // kUltralytics only: false never enlarges (ultralytics' scaleup=False)
  int fit_width = 640;  // kCuDLA only
  int fit_height = 640;
  uint8_t pad_value = 114;
};
// The cuDLA-samples input: long side 640, centred on 672x672.
LetterboxOptions cudla_letterbox_options();

// ---------------------------------------------------------------- plans (shared with the GPU)
// What a resize or a letterbox computes is decided once, on the host, by the plan_* functions below: which kernel
// OpenCV would pick for the sizes, its scale factors, the padding. The CPU functions in this file and the fused GPU
// kernel (tasks/cuda/preprocess.h) both execute these plans with the formulas above, so they cannot drift apart.
// The structs are plain data (trivially copyable) because the GPU receives them byte for byte.

enum class ResampleMethod : int32_t {
  kCopy,      // same size: the source pixels
  kLinear,    // INTER_LINEAR in fixed point (resize_linear's formula)
  kAreaFast,  // integer factors kx x ky: exact box average; 2x2 rounds half up ((sum + 2) >> 2), others round half
              // to even (float(sum) * (1.f / (kx * ky)))
  kArea,      // INTER_AREA with fractional factors (float weights; see resize_area)
};

struct ResampleStep {
  ResampleMethod method = ResampleMethod::kCopy;
  int src_w = 0, src_h = 0, dst_w = 0, dst_h = 0;
  double scale_x = 1.0, scale_y = 1.0;  // src / dst as OpenCV computes it: 1.0 / (double(dst) / src)
  int kx = 1, ky = 1;                   // kAreaFast only
};
// The step resize_linear / resize_area take for these sizes (no checks: callers validate sizes).
ResampleStep plan_resize_linear(int src_w, int src_h, int dst_w, int dst_h);
ResampleStep plan_resize_area(int src_w, int src_h, int dst_w, int dst_h);

struct LetterboxPlan {
  LetterboxStyle style = LetterboxStyle::kUltralytics;
  int out_w = 0, out_h = 0;
  uint8_t pad_value = 114;
  // kUltralytics / kYoloV5Val: the source goes through steps[0] (val's load_image; kCopy for kUltralytics), then
  // steps[1] (the letterbox resize); the result (steps[1].dst_w x dst_h) sits at (left, top), pad_value elsewhere.
  ResampleStep steps[2];
  int left = 0, top = 0;
  // kCuDLA: warpAffine's inverse map, output pixel -> source position: sx = m[0]*x + m[1]*y + m[2], sy = m[3]*x +
  // m[4]*y + m[5] (in double, then the fixed-point steps of LetterboxStyle::kCuDLA).
  double inv_map[6] = {0, 0, 0, 0, 0, 0};
  LetterboxInfo info;
};
// Validates the options against a src_w x src_h image and computes the plan (info included).
Expected<LetterboxPlan> plan_letterbox(int src_w, int src_h, const LetterboxOptions& opt);

// The result's geometry goes into LetterboxInfo (tasks/detection.h, shared with YOLO decoding):
//   x_net = x_orig * scale + pad_x,   x_orig = (x_net - pad_x) / scale   (y alike; continuous coordinates)
// kUltralytics / kYoloV5Val: scale = r and pad = the float (dw, dh) that ultralytics' letterbox returns (val.py hands
// both to scale_boxes), so boxes map back exactly as in val.py. kYoloV5Val: scale = (h / h0) * r (val.py uses h / h0;
// r is 1 unless the ceil in load_image overshoots the size by a pixel).
// kCuDLA: scale = s and pad = ((W - s*w) / 2, (H - s*h) / 2), the exact geometric centring (cuDLA-samples maps boxes
// back with pixel-centre offsets, up to half a source pixel away). orig_w / orig_h = the original image size.
Expected<Image> letterbox(const Image& img, const LetterboxOptions& opt, LetterboxInfo* info = nullptr);

// ---------------------------------------------------------------- to a tensor
enum class ChannelOrder { kRGB, kBGR };

// Value of channel c (after reordering) of a pixel x in 0..255, in float32 arithmetic, in this order:
//   v = (float(x) / divisor - mean[c]) / stddev[c]
// Defaults give v = x / 255. ImageNet-style: mean {0.485, 0.456, 0.406}, stddev {0.229, 0.224, 0.225}.
// dtype kFloat16 rounds v to the nearest half (ties to even); kInt8 quantizes it:
// q = clamp(round_half_even(v / int8_scale), -128, 127) (float32 division).
struct TensorOptions {
  ChannelOrder order = ChannelOrder::kRGB;
  TensorLayout layout = TensorLayout::kNCHW;
  float divisor = 255.f;
  std::array<float, 3> mean{0.f, 0.f, 0.f};
  std::array<float, 3> stddev{1.f, 1.f, 1.f};
  DType dtype = DType::kFloat32;  // kFloat32, kFloat16 or kInt8
  float int8_scale = 0.f;         // required (> 0) for kInt8
};

// Every output value as a function of (output channel, byte value): a pixel's value depends on nothing else, so the
// CPU packer and the GPU kernel both look values up here instead of each doing the float math.
struct TensorValueTable {
  int src_channel[3];   // output channel c reads RGB channel src_channel[c]
  float f32[3][256];
  uint16_t f16[3][256];  // IEEE binary16 bits
  int8_t i8[3][256];     // only filled for DType::kInt8
};
// Validates the options (dtype, divisor, stddev, int8 scale) and fills the table.
Expected<TensorValueTable> make_tensor_value_table(const TensorOptions& opt);

// Packs a batch of equally sized images into one tensor [N,3,H,W] (NCHW) or [N,H,W,3] (NHWC) of opt.dtype.
Expected<Tensor> images_to_tensor(const std::vector<const Image*>& batch, const TensorOptions& opt);
Expected<Tensor> image_to_tensor(const Image& img, const TensorOptions& opt);

// INT8 quantization of one float (the activation rule of docs' INT8 semantics).
int8_t quantize_int8(float v, float scale);

}  // namespace qd
