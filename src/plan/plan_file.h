// The plan file: a versioned, checksummed container for a compiled engine (docs/plan-format.md).
//
//   magic "QDPLAN\0\1" | u32 format version | header fields | u32 n, n x (name, u64 size, bytes) | u64 checksum
//
// All integers little-endian; strings are a u32 length then the bytes. The checksum (FNV-1a, 64 bit) covers every
// byte before it. What a section holds is up to the engine that wrote it; the sections every target writes ("io",
// "layers") have codecs here so that `qdeploy inspect` can show any plan without building its engine.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

namespace qd {

constexpr char kPlanMagic[8] = {'Q', 'D', 'P', 'L', 'A', 'N', '\0', '\1'};
// Bump on any change a reader of the previous version would misread; readers accept only their own version.
constexpr uint32_t kPlanFormatVersion = 4;

// The dynamic-shape profile of one input: the plan runs any shape between min and max (-1: any size).
struct ShapeProfile {
  std::string name;
  Shape min, opt, max;
};

struct PlanHeader {
  uint32_t format_version = kPlanFormatVersion;
  std::string qdeploy_version;  // QD_VERSION of the writer (information only; the format version decides)
  std::string target = "cpu";   // cpu | cuda
  uint32_t sm = 0;              // major*10+minor of the GPU it was built for; 0 for cpu
  uint32_t cuda_runtime_version = 0, cudnn_version = 0;  // 0 when none
  std::string precision = "fp32";                       // fp32 | fp16 | int8
  std::vector<ShapeProfile> profile;
};

struct PlanSection {
  std::string name;
  std::string data;
};

struct PlanFile {
  PlanHeader header;
  std::vector<PlanSection> sections;

  const PlanSection* find(const std::string& name) const;
  void add(std::string name, std::string data) { sections.push_back({std::move(name), std::move(data)}); }
};

// 64-bit FNV-1a.
uint64_t plan_checksum(const void* data, size_t size);

// Errors for an invalid header (unknown target or precision, bad profile) or duplicate section names.
Expected<std::string> encode_plan(const PlanFile& plan);
// Never crashes on any input; allocates at most about the input's size.
Expected<PlanFile> decode_plan(const uint8_t* data, size_t size);
// Atomic (a reader never sees half a plan).
Status write_plan(const std::string& path, const PlanFile& plan);
Expected<PlanFile> read_plan(const std::string& path);
// True when the bytes start with the plan magic.
bool has_plan_magic(const void* data, size_t size);
// True when they start with "QDPLAN" (a plan, though its magic may be damaged): decode_plan explains what is wrong.
bool looks_like_plan(const void* data, size_t size);

// Refuses a plan built for another GPU architecture (or for the CPU); sm_of_this_gpu as major*10+minor.
Status check_plan_target(const PlanHeader& header, int sm_of_this_gpu);

// One input's profile: same rank, min <= opt <= max wherever both dims are known (>= 0), and all three present.
Status check_shape_profile(const std::map<std::string, Shape>& min, const std::map<std::string, Shape>& opt,
                           const std::map<std::string, Shape>& max);

// Section "io": the engine's inputs and outputs as Engine::inputs()/outputs() report them.
struct PlanTensor {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;        // -1 where chosen at run time
  bool nhwc = false;  // the binding's memory is [N, H, W, C] (--input-format / --output-format)
  float scale = 0.f;  // int8 bindings: the INT8 scale of their values
};
struct PlanIo {
  std::vector<PlanTensor> inputs, outputs;
};
std::string encode_plan_io(const PlanIo& io);
Expected<PlanIo> decode_plan_io(const std::string& data);
// "images  int8[1x3x640x640]  nhwc  scale 0.0078721" (`qdeploy build` and `inspect`).
std::string plan_tensor_line(const PlanTensor& t);

// Section "layers": the precision each layer with MACs runs in, for `qdeploy inspect` (the precision plan's words,
// quant/precision_plan.h's precision_words: "int8", "float (asked)", "float (no scale)", ...; "fp32" / "fp16" in
// float plans; a CUDA plan's layers give their kernels' precisions).
struct PlanLayer {
  std::string name, op;
  int64_t macs = 0;
  std::string precision;
};
// True when the layer's words say it runs in INT8 (the plan file's text read back at the edge, for counting).
bool plan_layer_int8(const PlanLayer& l);
std::string encode_plan_layers(const std::vector<PlanLayer>& layers);
Expected<std::vector<PlanLayer>> decode_plan_layers(const std::string& data);

}  // namespace qd
