// Kernel selection: the policy over recorded choices, the timing loop and the timing cache files (plan/tactics.h).
#include "plan/tactics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/file_io.h"

namespace qd {

// At batch 1 the net is wider (four candidates within 15%): such a network runs alone, as the timer's refinement
// runs it; a larger batch may run as two lanes sharing the GPU, which one graph alone does not show.
NearTies near_ties(int batch) { return batch == 1 ? NearTies{4, 1.15f} : NearTies{3, 1.1f}; }

const std::string* nearest_batch_choice(const TacticChoices& choices, const std::string& sig) {
  const size_t a = sig.find(":n"), b = sig.find(':', a + 2);
  if (a == std::string::npos || b == std::string::npos) return nullptr;
  const std::string kind = sig.substr(0, a), rest = sig.substr(b);
  const long n = std::strtol(sig.c_str() + a + 2, nullptr, 10);
  const std::string* best = nullptr;
  long best_d = 0, best_n = 0;
  for (auto it = choices.lower_bound(kind + ":n"); it != choices.end() && it->first.compare(0, a + 2, kind + ":n") == 0;
       ++it) {
    const std::string& k = it->first;
    const size_t kb = k.find(':', a + 2);
    if (kb == std::string::npos || k.compare(kb, std::string::npos, rest) != 0) continue;
    const long kn = std::strtol(k.c_str() + a + 2, nullptr, 10);
    const long d = std::labs(kn - n);
    if (!best || d < best_d || (d == best_d && kn > best_n)) best = &it->second, best_d = d, best_n = kn;
  }
  return best;
}

namespace {

// Times each layer's tactics (a layer whose signature an earlier one in the list was timed under takes that pick),
// records the fastest, and collects the near ties of the refinable ones for the timer's refinement.
Status time_layers(const std::vector<TacticLayer*>& todo, TacticChoices* choices, TacticTimer& timer) {
  std::map<std::string, std::vector<std::string>> close;
  for (TacticLayer* l : todo) {
    const std::string sig = l->signature();
    if (auto it = choices->find(sig); it != choices->end() && l->apply(it->second)) continue;
    float best = 0.f;
    const Tactic* pick = nullptr;
    std::vector<std::pair<float, const Tactic*>> refinable;
    const std::vector<Tactic> tactics = l->tactics();
    for (const Tactic& t : tactics) {
      Expected<float> ms = timer.time(*l, t);
      if (!ms) {
        if (t.optional) continue;
        return ms.status();
      }
      if (t.refinable) refinable.emplace_back(*ms, &t);
      if (!pick || *ms < best) best = *ms, pick = &t;
    }
    if (!pick) return internal("no kernel could run the layer of signature " + sig);
    (*choices)[sig] = pick->name;
    if (!l->apply(pick->name)) return internal("tactic " + pick->name + " was timed but cannot be set up again");
    std::stable_sort(refinable.begin(), refinable.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::string>& near = close[sig] = {pick->name};
    const NearTies net = near_ties(l->batch());
    for (const auto& [ms, t] : refinable) {
      if (near.size() < net.candidates && ms <= best * net.within && t->name != pick->name) near.push_back(t->name);
    }
  }
  return timer.refine(close, choices);
}

}  // namespace

Expected<TacticStats> select_tactics(const std::vector<TacticLayer*>& layers, TacticChoices* choices,
                                     const TacticPolicy& policy, TacticTimer* timer) {
  TacticStats stats;
  std::vector<TacticLayer*> todo;
  for (TacticLayer* l : layers) {
    const std::string sig = l->signature();
    auto it = choices->find(sig);
    if (it == choices->end()) {
      const std::string legacy = l->legacy_signature();
      if (!legacy.empty()) it = choices->find(legacy);
    }
    if (it != choices->end() && l->apply(it->second)) {
      ++stats.reused;
      continue;
    }
    // A stale choice (a kernel this build lacks) is timed again, whatever the batch.
    if (!policy.frozen && (policy.tune || !policy.profile || it != choices->end())) {
      todo.push_back(l);
      continue;
    }
    if (const std::string* near = nearest_batch_choice(*choices, sig); near && l->apply(*near)) {
      ++stats.nearest;
      continue;
    }
    if (!policy.frozen) {
      todo.push_back(l);
      continue;
    }
    const std::vector<Tactic> tactics = l->tactics();
    if (tactics.empty() || !l->apply(tactics.front().name)) {
      return internal("no kernel can run the layer of signature " + sig);
    }
    ++stats.defaulted;
  }
  if (!todo.empty()) {
    if (!timer) return internal("select_tactics: layers to time but no timer");
    QD_RETURN_IF_ERROR(time_layers(todo, choices, *timer));
    stats.timed = static_cast<int>(todo.size());
  }
  return stats;
}

void read_timing_cache(const std::string& path, const std::string& device, const std::string& policy,
                       TacticChoices* out) {
  if (path.empty()) return;
  std::ifstream f(path);
  if (!f) return;  // a new cache
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("device", "") != device || !j.contains("kernels") ||
      !j["kernels"].is_object()) {
    std::fprintf(stderr, "warning: timing cache %s is unreadable or from another GPU; timing again\n", path.c_str());
    return;
  }
  if (j.value("kernel_policy", "") != policy) {
    std::fprintf(stderr, "warning: timing cache %s was written under another kernel policy ('%s', this build '%s'); "
                 "timing again\n", path.c_str(), j.value("kernel_policy", "").c_str(), policy.c_str());
    return;
  }
  for (const auto& [k, v] : j["kernels"].items()) {
    if (v.is_string()) out->emplace(k, v.get<std::string>());
  }
}

Status write_timing_cache(const std::string& path, const std::string& device, const std::string& policy,
                          const TacticChoices& choices) {
  if (path.empty()) return Status::ok();
  nlohmann::json j;
  j["device"] = device;
  if (!policy.empty()) j["kernel_policy"] = policy;
  j["kernels"] = choices;
  return write_file_atomic(path, j.dump(1));
}

}  // namespace qd
