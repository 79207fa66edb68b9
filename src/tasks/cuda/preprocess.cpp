#include "tasks/cuda/preprocess.h"

#include <cstring>
#include <string>

#include "backends/cuda/cuda_util.h"
#include "tasks/cuda/kernels/preprocess.h"

namespace qd::cuda {

// ---------------------------------------------------------------- StagingBuffer

StagingBuffer::~StagingBuffer() {
  (void)wait();
  release();
  if (done_) cudaEventDestroy(done_);
}

void StagingBuffer::release() {
  if (host_) cudaFreeHost(host_);
  if (device_) cudaFree(device_);
  host_ = device_ = nullptr;
  capacity_ = 0;
}

Status StagingBuffer::wait() {
  if (!pending_) return Status::ok();
  pending_ = false;
  QD_CUDA_TRY(cudaEventSynchronize(done_));
  return Status::ok();
}

Expected<uint8_t*> StagingBuffer::begin(size_t bytes) {
  QD_RETURN_IF_ERROR(wait());
  if (bytes > capacity_) {
    release();
    // Grow by half again, so that a slowly growing batch does not reallocate (and re-pin) every time.
    const size_t want = std::max(bytes, capacity_ + capacity_ / 2);
    QD_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&host_), want, cudaHostAllocDefault));
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&device_), want); e != cudaSuccess) {
      release();
      return cuda_status(e, "cudaMalloc (preprocessing staging buffer)");
    }
    capacity_ = want;
  }
  return host_;
}

Expected<const uint8_t*> StagingBuffer::upload(size_t bytes, cudaStream_t stream) {
  if (bytes > capacity_) return internal("StagingBuffer::upload: more bytes than begin() asked for");
  QD_CUDA_TRY(cudaMemcpyAsync(device_, host_, bytes, cudaMemcpyHostToDevice, stream));
  return static_cast<const uint8_t*>(device_);
}

Status StagingBuffer::finish(cudaStream_t stream) {
  if (!done_) QD_CUDA_TRY(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  QD_CUDA_TRY(cudaEventRecord(done_, stream));
  pending_ = true;
  return Status::ok();
}

// ---------------------------------------------------------------- packing

Expected<PackedImages> pack_images(const std::vector<const Image*>& images, size_t header_bytes, uint8_t* dst) {
  constexpr size_t kAlign = 16;
  PackedImages p;
  size_t at = (header_bytes + kAlign - 1) / kAlign * kAlign;
  p.offsets.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const Image* im = images[i];
    if (!im || im->empty() || im->channels != 3 || im->width > kMaxImageSide || im->height > kMaxImageSide ||
        im->data.size() != im->row_bytes() * static_cast<size_t>(im->height)) {
      return invalid("GPU preprocessing: image " + std::to_string(i) + " is empty or malformed");
    }
    p.offsets.push_back(at);
    if (dst) std::memcpy(dst + at, im->data.data(), im->data.size());
    at += (im->data.size() + kAlign - 1) / kAlign * kAlign;
  }
  p.bytes = at;
  return p;
}

// ---------------------------------------------------------------- ImagePreprocessor

Expected<std::unique_ptr<ImagePreprocessor>> ImagePreprocessor::create(const LetterboxOptions& letterbox,
                                                                       const TensorOptions& tensor) {
  // Validates the options the same way the CPU path does (a 1x1 image stands in for the real ones).
  QD_RETURN_IF_ERROR(plan_letterbox(1, 1, letterbox).status());
  const TensorValueTable table = QD_TRY(make_tensor_value_table(tensor));
  std::unique_ptr<ImagePreprocessor> p(new ImagePreprocessor(letterbox, tensor));
  for (int c = 0; c < 3; ++c) p->src_channel_[c] = table.src_channel[c];
  QD_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&p->table_), sizeof(TensorValueTable)));
  QD_CUDA_TRY(cudaMemcpy(p->table_, &table, sizeof table, cudaMemcpyHostToDevice));
  return p;
}

ImagePreprocessor::~ImagePreprocessor() {
  if (table_) {
    // The last batch's kernel may still read the table.
    (void)staging_.begin(0);
    cudaFree(table_);
  }
}

Shape ImagePreprocessor::output_shape(int n) const {
  const int64_t h = letterbox_.height, w = letterbox_.width;
  return tensor_.layout == TensorLayout::kNCHW ? Shape{n, 3, h, w} : Shape{n, h, w, 3};
}

size_t ImagePreprocessor::output_bytes(int n) const {
  return static_cast<size_t>(n) * 3 * static_cast<size_t>(letterbox_.width) * static_cast<size_t>(letterbox_.height) *
         dtype_size(tensor_.dtype);
}

Status ImagePreprocessor::run(const std::vector<const Image*>& images, void* d_out, cudaStream_t stream,
                              std::vector<LetterboxInfo>* infos, const cudaEvent_t* upload_events) {
  const size_t n = images.size();
  if (n < 1 || n > 65535) return invalid("GPU preprocessing: a batch holds 1..65535 images, got " + std::to_string(n));
  if (!d_out) return invalid("GPU preprocessing: no output buffer");
  // Everything that can fail on the images fails here, before the staging memory is touched.
  std::vector<LetterboxJob> jobs(n);
  const size_t header = n * sizeof(LetterboxJob);
  const PackedImages layout = QD_TRY(pack_images(images, header, nullptr));
  for (size_t i = 0; i < n; ++i) {
    auto plan = plan_letterbox(images[i]->width, images[i]->height, letterbox_);
    if (!plan) return Status(plan.status()).prefix("image " + std::to_string(i));
    jobs[i].plan = *plan;
    jobs[i].src_offset = layout.offsets[i];
  }
  uint8_t* host = QD_TRY(staging_.begin(layout.bytes));
  std::memcpy(host, jobs.data(), header);
  QD_RETURN_IF_ERROR(pack_images(images, header, host).status());
  if (upload_events) QD_CUDA_TRY(cudaEventRecord(upload_events[0], stream));
  const uint8_t* dev = QD_TRY(staging_.upload(layout.bytes, stream));
  if (upload_events) QD_CUDA_TRY(cudaEventRecord(upload_events[1], stream));

  PackLaunch launch;
  launch.staging = dev;
  launch.n = static_cast<int>(n);
  launch.out_w = letterbox_.width;
  launch.out_h = letterbox_.height;
  launch.table = table_;
  for (int c = 0; c < 3; ++c) launch.src_channel[c] = src_channel_[c];
  launch.layout = tensor_.layout;
  launch.dtype = tensor_.dtype;
  launch.out = d_out;
  const Status s = launch_letterbox_pack(launch, stream);
  // Recorded even after a failed launch, so that the upload is waited for before the memory is reused.
  QD_RETURN_IF_ERROR(staging_.finish(stream));
  QD_RETURN_IF_ERROR(s);
  if (infos) {
    infos->resize(n);
    for (size_t i = 0; i < n; ++i) (*infos)[i] = jobs[i].plan.info;
  }
  return Status::ok();
}

}  // namespace qd::cuda
