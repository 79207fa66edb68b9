// What the classification commands (`classify`, `eval --fmnist`, `eval --classes`) share, so that they prepare images
// and read class names the same way: a classifier's input size and --preprocess spec, running a batch of images, and
// a --labels file.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "runtime/engine.h"
#include "tasks/image_io.h"
#include "tasks/model_input.h"

namespace qd::cli {

// A classifier's image input: the --preprocess spec (default: fit into the inner 7/8, values x / 255; the `imagenet`
// preset: short side to 256, centre 224x224, ImageNet mean/std) and the network size (the model's; a dynamic one from
// the spec, else 32x32).
struct ClassifierInput {
  PreprocessSpec spec;
  int width = 32, height = 32;
};
// `model` names the model in errors; `preprocess` is the --preprocess text (empty: the default).
Expected<ClassifierInput> classifier_input_for(const std::string& model, const std::string& preprocess,
                                               const Engine& engine);

// Milliseconds spent in run_classifier, added up over calls.
struct ClassifierTimings {
  double preprocess_ms = 0;  // resize and pack into the input tensor
  double inference_ms = 0;   // Engine::run (inputs in, outputs back on the host)
};
// Runs a classifier on one batch of images (into its one input `input`), preprocessed per `c`.
Expected<std::vector<Tensor>> run_classifier(Engine& engine, const std::string& input, const std::vector<Image>& imgs,
                                             const ClassifierInput& c, ClassifierTimings* timings = nullptr);

// A --labels file: one class name per line (line i = label i; trailing spaces and CRs dropped, blank lines skipped).
// Errors name the file and say what is wrong (unreadable, no names, a name twice).
Expected<std::vector<std::string>> read_class_names(const std::string& path);

}  // namespace qd::cli
