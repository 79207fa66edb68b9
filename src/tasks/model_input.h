// How an image becomes a model's input, in one place for every command that feeds images to a model: calibration
// (`calibrate`, a build's --calib), sensitivity analysis and evaluation. Scales calibrated on pixels that were
// resampled another way than at inference are scales for other data, so these commands share the code below.
//   detectors    a letterbox, in the style the commands' --letterbox names (default: YOLOv5 val.py's);
//   classifiers  classifier_input(): an aspect-keeping resize into the inner 7/8 box, centred on a black canvas.
#pragma once

#include <string>

#include "core/status.h"
#include "tasks/image_io.h"
#include "tasks/preprocess.h"

namespace qd {

// The default of --letterbox wherever a command takes it (eval, calibrate, sensitivity) and the style of a build's
// --calib images unless the command says otherwise: ultralytics YOLOv5 val.py's (LetterboxStyle::kYoloV5Val).
inline constexpr const char kDefaultLetterbox[] = "val";

// --letterbox STYLE as LetterboxOptions for a size x size network input (Detector::create replaces the size with the
// model's when its input shape is fixed):
//   "val"          kYoloV5Val (val.py: long side resized first, INTER_AREA when shrinking; no enlarging in letterbox)
//   "ultralytics"  kUltralytics with scaleup (ultralytics' letterbox(auto=False), as detect.py)
//   "cudla"        cudla_letterbox_options() (640 centred on 672x672; `size` does not apply)
// Anything else is an error that names the three.
Expected<LetterboxOptions> letterbox_options(const std::string& style, int size = 640);

// Image-folder classifier input of the network's size w x h, laid out as Fashion-MNIST's (fmnist_image_32: the 28x28
// glyph centred on a black 32x32 canvas):
//   - an image already of size w x h is used as is (the trees `qdeploy dataset` exports);
//   - any other image is scaled, keeping its aspect ratio (INTER_AREA when shrinking, INTER_LINEAR when enlarging),
//     to fit the inner (w - w/8) x (h - h/8) box (28x28 of 32x32), and centred on a black w x h canvas (offsets
//     rounded down). A 28x28 Fashion-MNIST glyph thus gives exactly fmnist_image_32's image.
Expected<Image> classifier_input(const Image& img, int w, int h);

}  // namespace qd
