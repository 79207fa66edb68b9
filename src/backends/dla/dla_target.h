// Orin's DLA as a rules-only target: per node, whether TensorRT can place it on the DLA (and if not, why), with the
// limits TensorRT's documentation states for the version the profile names. No kernels: the answers come from the
// node's op, attributes and shapes, so they are available on any machine. docs/dla.md lists every rule and its source.
//
// Versions covered (the profile's `version`):
//   8.6  TensorRT 8.6 with DLA 3.14 (JetPack 6.0, DRIVE OS 6.0.8): the seeds' setup; INT8 SiLU fused into the Conv.
//   10   TensorRT 10.0 to 10.7 with DLA 3.14+ (JetPack 6.1/6.2). TensorRT 10.7 is the last release with DLA: 11.0 to
//        11.3 do not support it, so a TensorRT 11 build of the same model runs on the GPU only.
#pragma once

#include <string>
#include <vector>

#include "plan/target.h"

namespace qd {

struct DlaProfile {
  std::string version;      // "8.6", "10"
  std::string tensorrt;     // "TensorRT 8.6"
  std::string dla;          // the DLA compiler release it pairs with on Orin
  std::string layer_doc;    // where the layer rules come from (document and section)
  int max_loadables_per_core = 16;  // DLA subgraphs ("loadables") one DLA core holds at once
  int64_t max_batch = 4096;         // product of the dims before C, H, W
  int64_t max_dim = 8192;           // any non-batch dim
  bool silu_fusion = true;          // INT8 Sigmoid native and Conv + SiLU fused (DLA 3.14)
};

// The profile for "8.6" or "10" ("" gives the default, 10); an error lists the versions covered.
Expected<DlaProfile> dla_profile(const std::string& version);
std::vector<std::string> dla_profile_versions();

class DlaTarget : public Target {
 public:
  explicit DlaTarget(DlaProfile profile) : p_(std::move(profile)) {}
  std::string name() const override { return "dla:" + p_.version; }
  Support supports(const Graph& g, const Node& n, const NodeFormats& formats) const override;
  const DlaProfile& profile() const { return p_; }

 private:
  DlaProfile p_;
};

// True when `n` is the Mul of a SiLU, x * Sigmoid(x), that DLA 3.14 fuses (with the Sigmoid) into one operation.
bool is_silu_mul(const Graph& g, const Node& n);

}  // namespace qd
