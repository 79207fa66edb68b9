// How an image becomes a model's input, in one place for every command that feeds images to a model: calibration
// (`calibrate`, a build's --calib), sensitivity analysis and evaluation. Scales calibrated on pixels that were
// resampled another way than at inference are scales for other data, so these commands share the code below.
//   detectors    a letterbox, in the style the commands' --letterbox names (default: YOLOv5 val.py's);
//   classifiers  classifier_input(): an aspect-keeping resize into the inner 7/8 box, centred on a black canvas.
//   any model    a --preprocess spec (PreprocessSpec below): size, resize mode, mean/std, channel order, layout.
#pragma once

#include <string>
#include <vector>

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

// ---------------------------------------------------------------- --preprocess SPEC
// One comma-separated list of KEY=VALUE that every command feeding images to a model takes as --preprocess
// (calibrate, a build's --calib, sensitivity, eval, detect, run); a value of several numbers continues over the
// commas that follow it (mean=0.485,0.456,0.406). Keys, each optional:
//   size=N | HxW      network input height x width (default: the model's fixed H and W; required when dynamic)
//   resize=MODE       fit         aspect kept, into the inner 7/8 box, centred on `pad` (classifier_input)
//                     stretch     to HxW, aspect not kept (INTER_AREA when shrinking, INTER_LINEAR when enlarging)
//                     center-crop aspect kept, scaled so that HxW covers the fraction `crop` of it (the short side
//                                 to H/crop or W/crop), the centre HxW cut out (offsets rounded down): torchvision's
//                                 Resize(S/crop) + CenterCrop(S)
//   crop=F            center-crop only: 0 < F <= 1 (default 1: the short side fills HxW; 0.875: 256 then 224)
//                     letterbox   aspect kept, fit inside HxW and padded with `pad` (ultralytics' letterbox, scaleup)
//                     none        the image must be HxW already
//                     (default: a YOLO detector's --letterbox style, else fit)
//   mean=R,G,B std=R,G,B   per tensor channel (after `order`), in units of pixel / 255:  v = (x / 255 - mean) / std
//                     (one number: all three channels; default 0 and 1, i.e. v = x / 255)
//   order=rgb|bgr     channel order of the tensor (default rgb)
//   layout=nchw|nhwc  tensor layout (default nchw)
//   pad=0..255        fill of letterbox (default 114)
// A first item `imagenet` (no value) stands for resize=center-crop,crop=0.875,mean=0.485,0.456,0.406,
// std=0.229,0.224,0.225 (ImageNet classifiers' evaluation: the short side to 256, the centre 224x224; RGB; NCHW); the
// keys after it override it (imagenet,size=384).
enum class ResizeMode { kDefault, kFit, kStretch, kCenterCrop, kLetterbox, kNone };

struct PreprocessSpec {
  int width = 0, height = 0;  // 0: the model's
  ResizeMode resize = ResizeMode::kDefault;
  int pad = -1;  // letterbox fill; -1: 114
  float crop = 1.f;  // center-crop: the fraction of the resized image the HxW crop covers
  TensorOptions tensor;  // order, layout, mean, stddev (divisor 255, float32)
  bool given = false;    // a spec was given (false: the commands' image defaults)
};
Expected<PreprocessSpec> parse_preprocess_spec(const std::string& text);
// The spec written back as --preprocess text (keys that differ from the defaults, in a fixed order).
std::string preprocess_spec_str(const PreprocessSpec& spec);

// The network input size for `spec` and a model input of shape `shape` ([N,3,H,W], or [N,H,W,3] with layout nhwc):
// the model's fixed dims, the spec's size where they are dynamic; an error when neither gives them, or when they
// disagree.
Status resolve_input_size(const PreprocessSpec& spec, const Shape& shape, int* width, int* height);

// One image resized per `spec` (mode kDefault acts as `fallback`) to width x height. Letterbox geometry goes to
// `info` when given (for mapping boxes back).
Expected<Image> resize_for_model(const Image& img, const PreprocessSpec& spec, int width, int height,
                                 ResizeMode fallback = ResizeMode::kFit, LetterboxInfo* info = nullptr);
// A batch of images as the model's input tensor: resize_for_model, then the spec's values and layout.
Expected<Tensor> images_to_model_input(const std::vector<const Image*>& images, const PreprocessSpec& spec, int width,
                                       int height, ResizeMode fallback = ResizeMode::kFit);

}  // namespace qd
