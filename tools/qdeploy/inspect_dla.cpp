#include "inspect_dla.h"

#include <iostream>

#include "commands.h"
#include "core/file_io.h"
#include "trt_model.h"

namespace qd::cli {

bool parse_dla_target(const std::string& target, std::string* version) {
  if (target == "dla") {
    version->clear();
    return true;
  }
  if (target.rfind("dla:", 0) == 0) {
    *version = target.substr(4);
    return true;
  }
  return false;
}

int inspect_dla(const std::string& model, const std::string& version, const BuildFlags& f, bool json, bool layers,
                const std::string& svg) {
  auto profile = dla_profile(version);
  if (!profile) return report(Status(profile.status()).prefix("--target"));
  if (f.device != BuildFlags().device) {
    return report(invalid("--target dla analyses the model for TensorRT on Orin; drop --device " + f.device));
  }
  auto m = load_trt_model(model, f);
  if (!m) return report(m.status());
  const DlaTarget target(*profile);
  const DlaPlacement p = place_on_dla(m->prepared, target, dla_options(*m));
  if (!svg.empty()) {
    if (Status s = write_file_atomic(svg, dla_placement_svg(p, model + " on " + target.name())); !s.is_ok()) {
      return report(s);
    }
  }
  if (json) {
    std::cout << dla_placement_json(p) << "\n";
  } else {
    std::cout << "model: " << model << "  (" << f.precision << ")\n" << format_dla_placement(p, layers);
    std::cout << "rules: " << profile->layer_doc << " (docs/dla.md)\n";
    if (!svg.empty()) std::cout << "wrote " << svg << "\n";
  }
  return 0;
}

}  // namespace qd::cli
