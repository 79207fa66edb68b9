// Detects objects in one image with a YOLOv5 ONNX model or plan, through qdeploy's installed C++ API:
//   detect MODEL.onnx|PLAN IMAGE [cpu|cuda]
// Builds (or loads) the engine, letterboxes the image, runs it in a context, decodes + NMS, prints one line per box.
#include <cstdio>
#include <string>

#include "qdeploy/qdeploy.h"

int fail(const qdeploy::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return s.code() == qdeploy::StatusCode::kInternal ? 1 : 2;
}

int main(int argc, char** argv) {
  if (argc < 3) return std::fprintf(stderr, "usage: %s MODEL.onnx|PLAN IMAGE [cpu|cuda]\n", argv[0]), 2;
  qdeploy::BuildOptions opt;
  opt.device = argc > 3 && std::string(argv[3]) == "cuda" ? qdeploy::Device::kCuda : qdeploy::Device::kCpu;
  auto engine = qdeploy::is_plan(argv[1]) ? qdeploy::load(argv[1]) : qdeploy::build(argv[1], opt);
  if (!engine) return fail(engine.status());
  auto detector = qdeploy::Detector::create(*engine);
  auto image = qdeploy::read_image(argv[2]);
  if (!detector || !image) return fail(!detector ? detector.status() : image.status());

  auto batch = detector->letterbox({&*image});  // resized, padded, normalized: fp32 NCHW
  auto ctx = engine->create_context();
  if (!batch || !ctx) return fail(!batch ? batch.status() : ctx.status());
  const std::string input = engine->inputs()[0].name;
  qdeploy::Status s = (*ctx)->set_input_shapes({{input, batch->tensor.shape()}});
  if (s) s = (*ctx)->upload({{input, batch->tensor}}, nullptr);  // nullptr: the default stream (or a cudaStream_t)
  if (s) s = (*ctx)->enqueue(nullptr);                            // the CPU engine runs it synchronously
  if (!s) return fail(s);
  auto outputs = (*ctx)->download(nullptr);
  if (!outputs) return fail(outputs.status());
  auto dets = detector->decode(*outputs, *batch);  // decode + NMS, boxes in the image's pixels
  if (!dets) return fail(dets.status());

  std::printf("%s: %zu detections\n", engine->describe().c_str(), (*dets)[0].size());
  for (const qdeploy::Detection& d : (*dets)[0]) {
    const std::string name = qdeploy::class_name(d.class_id, detector->num_classes());
    std::printf("%-12s %.3f  [%.1f, %.1f, %.1f, %.1f]\n", name.c_str(), d.score, d.x1, d.y1, d.x2, d.y2);
  }
  return 0;
}
