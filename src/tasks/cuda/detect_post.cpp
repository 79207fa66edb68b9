#include "tasks/cuda/detect_post.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_util.h"
#include "core/half.h"
#include "tasks/cuda/kernels/yolo_nms.h"

namespace qd::cuda {

namespace {
constexpr int64_t kMaxIndex = (int64_t{1} << 31) - 1;  // int32 counters and CUB's int offsets
constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
}  // namespace

struct YoloPostprocessor::Impl {
  YoloNmsPlan plan;
  std::vector<void*> device_allocs;
  LetterboxInfo* d_infos = nullptr;
  // Results on the device and their pinned host copy: int counts[max_batch] (padded), then GpuDetection dets.
  uint8_t* d_results = nullptr;
  uint8_t* h_results = nullptr;
  size_t counts_bytes = 0;
  LetterboxInfo* h_infos = nullptr;  // pinned
  cudaEvent_t done = nullptr;
  // The batch in flight.
  bool pending = false;
  const void* pred = nullptr;
  int n = 0;
  bool mapped = false;
  cudaStream_t stream = nullptr;

  ~Impl() {
    if (pending && done) cudaEventSynchronize(done);
    for (void* p : device_allocs) cudaFree(p);
    if (h_results) cudaFreeHost(h_results);
    if (h_infos) cudaFreeHost(h_infos);
    if (done) cudaEventDestroy(done);
  }
  template <typename T>
  Status alloc(T** p, size_t bytes, size_t* total) {
    void* v = nullptr;
    QD_CUDA_TRY(cudaMalloc(&v, std::max<size_t>(bytes, 1)));
    device_allocs.push_back(v);
    *p = static_cast<T*>(v);
    *total += bytes;
    return Status::ok();
  }
};

Expected<std::unique_ptr<YoloPostprocessor>> YoloPostprocessor::create(const YoloGpuConfig& config) {
  QD_RETURN_IF_ERROR(check_yolo_options(config.post));
  const YoloGpuConfig& c = config;
  if (c.max_batch < 1 || c.max_batch > 65535) return invalid("GPU YOLO post-processing: max_batch must be 1..65535");
  if (c.num_classes < 1) return invalid("GPU YOLO post-processing: the model needs at least one class");
  if (c.boxes < 1 || c.boxes * c.num_classes > kMaxIndex) {
    return invalid("GPU YOLO post-processing: boxes x classes must be 1.." + std::to_string(kMaxIndex));
  }
  if (c.dtype != DType::kFloat32 && c.dtype != DType::kFloat16) {
    return unsupported(std::string("GPU YOLO post-processing: prediction type ") + dtype_name(c.dtype) +
                       " (float32 or float16)");
  }
  if (c.max_candidates < 0) return invalid("GPU YOLO post-processing: max_candidates must be >= 0");
  std::unique_ptr<YoloPostprocessor> p(new YoloPostprocessor());
  p->cfg_ = config;
  QD_RETURN_IF_ERROR(p->init());
  return p;
}

Status YoloPostprocessor::init() {
  QD_RETURN_IF_ERROR(yolo_nms_init());
  impl_ = std::make_unique<Impl>();
  YoloNmsPlan& pl = impl_->plan;
  const YoloPostprocessOptions& o = cfg_.post;
  pl.max_batch = cfg_.max_batch;
  pl.boxes = cfg_.boxes;
  pl.nc = cfg_.num_classes;
  pl.dtype = cfg_.dtype;
  pl.multi_label = o.multi_label && cfg_.num_classes > 1;  // yolo_candidates' rule
  pl.agnostic = o.agnostic;
  pl.conf_thres = o.conf_thres;
  pl.iou_thres = o.iou_thres;
  pl.max_wh = o.max_wh;
  const int64_t every = cfg_.boxes * (pl.multi_label ? cfg_.num_classes : 1);
  pl.cap = cfg_.max_candidates > 0 ? std::min(cfg_.max_candidates, every) : every;
  if (pl.cap * cfg_.max_batch > kMaxIndex) {
    return invalid("GPU YOLO post-processing: " + std::to_string(cfg_.max_batch) + " images x " +
                   std::to_string(pl.cap) + " candidate slots is too many; lower the batch or set max_candidates");
  }
  pl.kmax = static_cast<int>(std::min<int64_t>(o.max_nms, pl.cap));
  if (pl.kmax > yolo_nms_max_kmax(o.max_det)) {
    return invalid("GPU YOLO post-processing: max_nms " + std::to_string(o.max_nms) + " is above the GPU NMS limit " +
                   std::to_string(yolo_nms_max_kmax(o.max_det)));
  }
  pl.max_det = o.max_det;

  const size_t mb = static_cast<size_t>(cfg_.max_batch);
  const size_t slots = mb * static_cast<size_t>(pl.cap);
  size_t total = 0;
  Impl& im = *impl_;
  QD_RETURN_IF_ERROR(im.alloc(&pl.counts, sizeof(int) * mb, &total));
  QD_RETURN_IF_ERROR(im.alloc(&pl.keys, sizeof(uint64_t) * slots, &total));
  QD_RETURN_IF_ERROR(im.alloc(&pl.keys_sorted, sizeof(uint64_t) * slots, &total));
  QD_RETURN_IF_ERROR(im.alloc(&pl.seg_begin, sizeof(int) * mb, &total));
  QD_RETURN_IF_ERROR(im.alloc(&pl.seg_end, sizeof(int) * mb, &total));
  pl.sort_temp_bytes = QD_TRY(yolo_sort_temp_bytes(cfg_.max_batch, pl.cap));
  QD_RETURN_IF_ERROR(im.alloc(&pl.sort_temp, pl.sort_temp_bytes, &total));
  QD_RETURN_IF_ERROR(im.alloc(&pl.nms_boxes, sizeof(float) * 4 * mb * static_cast<size_t>(pl.kmax), &total));
  QD_RETURN_IF_ERROR(im.alloc(&pl.nms_area, sizeof(float) * mb * static_cast<size_t>(pl.kmax), &total));
  QD_RETURN_IF_ERROR(im.alloc(&im.d_infos, sizeof(LetterboxInfo) * mb, &total));
  im.counts_bytes = align_up(sizeof(int) * mb);
  const size_t results_bytes = im.counts_bytes + sizeof(GpuDetection) * mb * static_cast<size_t>(pl.max_det);
  QD_RETURN_IF_ERROR(im.alloc(&im.d_results, results_bytes, &total));
  QD_CUDA_TRY(cudaMemset(im.d_results, 0, results_bytes));  // copied back whole: keep it defined
  pl.out_counts = reinterpret_cast<int*>(im.d_results);
  pl.out_dets = reinterpret_cast<GpuDetection*>(im.d_results + im.counts_bytes);
  device_bytes_ = total;
  QD_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&im.h_results), results_bytes, cudaHostAllocDefault));
  QD_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&im.h_infos), sizeof(LetterboxInfo) * mb, cudaHostAllocDefault));
  QD_CUDA_TRY(cudaEventCreateWithFlags(&im.done, cudaEventDisableTiming));
  return Status::ok();
}

YoloPostprocessor::~YoloPostprocessor() = default;

Status YoloPostprocessor::enqueue(const void* d_pred, int n, const LetterboxInfo* infos, cudaStream_t stream,
                                  cudaEvent_t before_download) {
  Impl& im = *impl_;
  if (im.pending) return internal("YoloPostprocessor: collect() the previous batch before enqueuing another");
  if (n < 1 || n > cfg_.max_batch) {
    return invalid("GPU YOLO post-processing: batch " + std::to_string(n) + " outside 1.." +
                   std::to_string(cfg_.max_batch));
  }
  if (!d_pred) return invalid("GPU YOLO post-processing: no prediction tensor");
  if (infos) {
    for (int i = 0; i < n; ++i) {
      std::vector<Detection> none;  // unletterbox_detections validates the geometry even with nothing to map
      if (Status s = unletterbox_detections(none, infos[i]); !s) return s.prefix("image " + std::to_string(i));
    }
    std::memcpy(im.h_infos, infos, sizeof(LetterboxInfo) * static_cast<size_t>(n));
    QD_CUDA_TRY(cudaMemcpyAsync(im.d_infos, im.h_infos, sizeof(LetterboxInfo) * static_cast<size_t>(n),
                                cudaMemcpyHostToDevice, stream));
  }
  QD_RETURN_IF_ERROR(launch_yolo_nms(im.plan, d_pred, n, infos ? im.d_infos : nullptr, stream));
  if (before_download) QD_CUDA_TRY(cudaEventRecord(before_download, stream));
  im.pending = true;
  im.pred = d_pred;
  im.n = n;
  im.mapped = infos != nullptr;
  im.stream = stream;
  return download();
}

Status YoloPostprocessor::download() {
  Impl& im = *impl_;
  const size_t bytes = im.counts_bytes + sizeof(GpuDetection) * static_cast<size_t>(im.n) * im.plan.max_det;
  QD_CUDA_TRY(cudaMemcpyAsync(im.h_results, im.d_results, bytes, cudaMemcpyDeviceToHost, im.stream));
  QD_CUDA_TRY(cudaEventRecord(im.done, im.stream));
  return Status::ok();
}

Expected<std::vector<std::vector<Detection>>> YoloPostprocessor::collect() {
  Impl& im = *impl_;
  if (!im.pending) return internal("YoloPostprocessor: collect() without enqueue()");
  im.pending = false;
  QD_CUDA_TRY(cudaEventSynchronize(im.done));
  const int* counts = reinterpret_cast<const int*>(im.h_results);
  if (std::find(counts, counts + im.n, kNmsPending) != counts + im.n) {
    // Images with more candidates than the in-block sort takes: finish them on the device (a second round trip).
    QD_RETURN_IF_ERROR(launch_yolo_nms_pending(im.plan, im.pred, im.n, im.mapped ? im.d_infos : nullptr, im.stream));
    QD_RETURN_IF_ERROR(download());
    QD_CUDA_TRY(cudaEventSynchronize(im.done));
  }
  const GpuDetection* dets = reinterpret_cast<const GpuDetection*>(im.h_results + im.counts_bytes);
  std::vector<std::vector<Detection>> out(static_cast<size_t>(im.n));
  for (int i = 0; i < im.n; ++i) {
    if (counts[i] < 0) {
      out[static_cast<size_t>(i)] = QD_TRY(cpu_fallback(i));
      continue;
    }
    std::vector<Detection>& v = out[static_cast<size_t>(i)];
    v.reserve(static_cast<size_t>(counts[i]));
    const GpuDetection* d = dets + static_cast<size_t>(i) * im.plan.max_det;
    for (int k = 0; k < counts[i]; ++k) {
      Detection det;
      det.x1 = d[k].x1, det.y1 = d[k].y1, det.x2 = d[k].x2, det.y2 = d[k].y2;
      det.score = d[k].score;
      det.class_id = d[k].class_id;
      det.image = i;
      v.push_back(det);
    }
  }
  return out;
}

// The CPU path for one image, from a copy of its rows (the image had more candidates than max_candidates).
Expected<std::vector<Detection>> YoloPostprocessor::cpu_fallback(int image) const {
  const Impl& im = *impl_;
  const int64_t row_len = 5 + cfg_.num_classes;
  const size_t count = static_cast<size_t>(cfg_.boxes * row_len);
  std::vector<float> rows(count);
  const size_t offset = static_cast<size_t>(image) * count;
  if (cfg_.dtype == DType::kFloat16) {
    std::vector<uint16_t> half(count);
    QD_CUDA_TRY(cudaMemcpy(half.data(), static_cast<const uint16_t*>(im.pred) + offset, count * 2,
                           cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) rows[i] = half_to_float(half[i]);
  } else {
    QD_CUDA_TRY(cudaMemcpy(rows.data(), static_cast<const float*>(im.pred) + offset, count * 4,
                           cudaMemcpyDeviceToHost));
  }
  std::vector<Detection> dets = yolov5_postprocess_image(rows.data(), cfg_.boxes, row_len, image, cfg_.post);
  if (im.mapped) QD_RETURN_IF_ERROR(unletterbox_detections(dets, im.h_infos[image]));
  return dets;
}

Expected<std::vector<std::vector<Detection>>> YoloPostprocessor::run(const void* d_pred, int n,
                                                                     const LetterboxInfo* infos, cudaStream_t stream) {
  QD_RETURN_IF_ERROR(enqueue(d_pred, n, infos, stream));
  return collect();
}

}  // namespace qd::cuda
