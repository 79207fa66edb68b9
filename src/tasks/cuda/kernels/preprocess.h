// The fused letterbox + pack kernel behind cuda::ImagePreprocessor (tasks/cuda/preprocess.h): internal interface.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/status.h"
#include "tasks/preprocess.h"

namespace qd::cuda {

// One image of a batch as the kernel reads it from the staging buffer: where its HWC RGB bytes start (from the staging
// buffer's base) and the letterbox plan computed on the host by plan_letterbox().
struct LetterboxJob {
  uint64_t src_offset = 0;
  LetterboxPlan plan;
};
static_assert(std::is_trivially_copyable_v<LetterboxJob>, "jobs are copied to the device byte for byte");

struct PackLaunch {
  const uint8_t* staging = nullptr;         // device: LetterboxJob[n] at offset 0, pixels at the jobs' offsets
  int n = 0;                                // images (gridDim.z: at most 65535)
  int out_w = 0, out_h = 0;                 // every plan's out_w / out_h
  const TensorValueTable* table = nullptr;  // device copy of make_tensor_value_table()
  int src_channel[3] = {0, 1, 2};           // the table's src_channel (passed by value: no device read)
  TensorLayout layout = TensorLayout::kNCHW;
  DType dtype = DType::kFloat32;            // kFloat32, kFloat16 or kInt8: which of the table's columns is written
  void* out = nullptr;                      // device: [n,3,H,W] or [n,H,W,3] of dtype
};

// Enqueues the kernel on `stream`: every output pixel computed from the source image by the plan (bit-exact with
// letterbox() on the CPU), then written through the table. Does not synchronize.
Status launch_letterbox_pack(const PackLaunch& p, cudaStream_t stream);

}  // namespace qd::cuda
