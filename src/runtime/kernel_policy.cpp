// include/qdeploy/kernel_policy.h: the policy as text (plan files, timing-cache keys, the CLI's --kernel-policy).
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "qdeploy/kernel_policy.h"

namespace qdeploy {

namespace {

// The switches in their fixed order (to_string writes them so).
std::vector<std::pair<const char*, bool KernelPolicy::*>> switches() {
  return {{"wgmma", &KernelPolicy::wgmma},
          {"tma", &KernelPolicy::tma},
          {"warp-halo-s2", &KernelPolicy::warp_halo_s2},
          {"warp-pw", &KernelPolicy::warp_pw},
          {"cluster-split", &KernelPolicy::cluster_split},
          {"image-stem", &KernelPolicy::image_stem},
          {"staged-epilogue", &KernelPolicy::staged_epilogue},
          {"quad-epilogue", &KernelPolicy::quad_epilogue},
          {"small-acc", &KernelPolicy::small_acc},
          {"lean-epilogue", &KernelPolicy::lean_epilogue},
          {"pdl", &KernelPolicy::pdl},
          {"side-stream", &KernelPolicy::side_stream},
          {"graph-refine", &KernelPolicy::graph_refine}};
}

const char* split_word(BatchSplit s) {
  switch (s) {
    case BatchSplit::kWhole: return "whole";
    case BatchSplit::kLanes: return "lanes2";
    case BatchSplit::kLanesInStep: return "lanes2_step";
    case BatchSplit::kTimed: break;
  }
  return "timed";
}

}  // namespace

std::string KernelPolicy::to_string() const {
  std::string out;
  auto add = [&](const std::string& w) { out += (out.empty() ? "" : ",") + w; };
  for (const auto& [name, member] : switches()) {
    if (!(this->*member)) add(std::string("no-") + name);
  }
  if (batch_split != BatchSplit::kTimed) add(std::string("split=") + split_word(batch_split));
  if (!only_config.empty()) add("only-config=" + only_config);
  return out;
}

Expected<KernelPolicy> KernelPolicy::parse(const std::string& text) {
  KernelPolicy p;
  size_t pos = 0;
  while (pos < text.size()) {
    if (text.compare(pos, 12, "only-config=") == 0 && text.size() > pos + 12) {  // the last word: commas and all
      p.only_config = text.substr(pos + 12);
      break;
    }
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string w = text.substr(pos, end - pos);
    pos = end + 1;
    if (w.empty()) continue;
    bool known = false;
    for (const auto& [name, member] : switches()) {
      if (w == std::string("no-") + name) {
        p.*member = false;
        known = true;
      }
    }
    if (known) continue;
    if (w.rfind("split=", 0) == 0) {
      const std::string v = w.substr(6);
      bool found = false;
      for (BatchSplit s : {BatchSplit::kTimed, BatchSplit::kWhole, BatchSplit::kLanes, BatchSplit::kLanesInStep}) {
        if (v == split_word(s)) {
          p.batch_split = s;
          found = true;
        }
      }
      if (!found) {
        return Status(StatusCode::kInvalidArgument,
                      "kernel policy: split=" + v + " is not a batch split (timed, whole, lanes2, lanes2_step)");
      }
    } else {
      std::string words;
      for (const auto& [name, member] : switches()) words += std::string(words.empty() ? "" : ", ") + "no-" + name;
      return Status(StatusCode::kInvalidArgument, "kernel policy: unknown word '" + w + "' (known: " + words +
                                                      ", split=timed|whole|lanes2|lanes2_step, only-config=NAME)");
    }
  }
  return p;
}

}  // namespace qdeploy
