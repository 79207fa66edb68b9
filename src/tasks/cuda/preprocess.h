// GPU image preprocessing: a batch of decoded 8-bit RGB images of any sizes -> the network input tensor on the device,
// in one kernel launch (letterbox of any LetterboxStyle + pad + normalize + channel order + NCHW/NHWC + fp32 / fp16 /
// int8). The result is bit-identical to the CPU path, letterbox() then images_to_tensor() (tasks/preprocess.h): both
// execute the same host-computed LetterboxPlan and TensorValueTable.
//
// Use:
//   auto pre = QD_TRY(cuda::ImagePreprocessor::create(letterbox_opts, tensor_opts));
//   // d_input: device memory of pre->output_bytes(n), e.g. the engine's input binding
//   QD_RETURN_IF_ERROR(pre->run(images, d_input, stream, &infos));   // enqueued; infos ready at once
//   ... enqueue the engine on `stream` ...
// One ImagePreprocessor per stream (or thread): it reuses its pinned and device staging memory batch after batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/shape.h"
#include "core/status.h"
#include "tasks/detection.h"
#include "tasks/image_io.h"
#include "tasks/preprocess.h"

namespace qd::cuda {

// Pinned host memory and device memory of equal size, grown on demand and reused for every batch: the host fills the
// pinned memory, one asynchronous copy moves it to the device. Reuse is guarded by an event: begin() first waits until
// the device is done with the previous batch (everything enqueued before the last finish()). Uses the device that is
// current when the memory is first allocated.
class StagingBuffer {
 public:
  StagingBuffer() = default;
  ~StagingBuffer();
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // Waits for the previous batch, makes both buffers at least `bytes` large, returns the pinned memory to fill.
  Expected<uint8_t*> begin(size_t bytes);
  // Enqueues the copy of the first `bytes` to the device on `stream`; returns the device copy.
  Expected<const uint8_t*> upload(size_t bytes, cudaStream_t stream);
  // The device's use of this batch ends with the work enqueued on `stream` so far.
  Status finish(cudaStream_t stream);
  size_t capacity() const { return capacity_; }

 private:
  Status wait();
  void release();
  uint8_t* host_ = nullptr;
  uint8_t* device_ = nullptr;
  size_t capacity_ = 0;
  cudaEvent_t done_ = nullptr;
  bool pending_ = false;
};

// Where each image of a packed batch starts, in bytes from the staging buffer's base.
struct PackedImages {
  std::vector<uint64_t> offsets;
  size_t bytes = 0;  // header + all images
};

// Packs images (HWC RGB, validated: non-empty, consistent sizes) into `dst` after `header_bytes` of header, each image
// 16-byte aligned. With dst == nullptr only computes the offsets and the size.
Expected<PackedImages> pack_images(const std::vector<const Image*>& images, size_t header_bytes, uint8_t* dst);

class ImagePreprocessor {
 public:
  // tensor.dtype: kFloat32, kFloat16 or kInt8 (with tensor.int8_scale, the input's INT8 scale).
  static Expected<std::unique_ptr<ImagePreprocessor>> create(const LetterboxOptions& letterbox,
                                                             const TensorOptions& tensor);
  ~ImagePreprocessor();
  ImagePreprocessor(const ImagePreprocessor&) = delete;
  ImagePreprocessor& operator=(const ImagePreprocessor&) = delete;

  const LetterboxOptions& letterbox_options() const { return letterbox_; }
  const TensorOptions& tensor_options() const { return tensor_; }
  // [n,3,H,W] (NCHW) or [n,H,W,3] (NHWC), H x W = the letterbox output size.
  Shape output_shape(int n) const;
  size_t output_bytes(int n) const;

  // Plans every image (a bad image is an error before anything is enqueued), packs the batch into pinned memory and
  // enqueues one upload and one kernel on `stream`, writing output_bytes(images.size()) bytes at d_out (device).
  // Returns once enqueued; `infos` (optional) receives each image's letterbox geometry for mapping boxes back.
  // The images may be freed as soon as run() returns. Blocks only while the previous batch still uses the staging.
  // upload_events (optional, two events): recorded on `stream` right before and after the upload, so that the caller
  // can time the copy and the kernel apart from the host-side packing.
  Status run(const std::vector<const Image*>& images, void* d_out, cudaStream_t stream,
             std::vector<LetterboxInfo>* infos = nullptr, const cudaEvent_t* upload_events = nullptr);

 private:
  ImagePreprocessor(const LetterboxOptions& l, const TensorOptions& t) : letterbox_(l), tensor_(t) {}
  LetterboxOptions letterbox_;
  TensorOptions tensor_;
  int src_channel_[3] = {0, 1, 2};
  TensorValueTable* table_ = nullptr;  // device
  StagingBuffer staging_;
};

}  // namespace qd::cuda
