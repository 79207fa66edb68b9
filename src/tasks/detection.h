// The detection types shared by pre-processing (letterbox), decoding (YOLO), NMS and evaluation (COCO).
#pragma once

#include <cstdint>

namespace qd {

// One detected object. Boxes are corners in pixels: in the network input's frame right after decoding, in the
// original image's frame after unletterbox_detections(). class_id is the model's contiguous class index (0..nc-1);
// eval/ maps it to a dataset category id. image is the index of the image in the batch (or in the dataset).
struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  float score = 0;
  int class_id = 0;
  int64_t image = 0;
};

// How an original image of orig_w x orig_h was placed into the network input by a letterbox:
// input = original * scale + (pad_x, pad_y). To go back: original = (input - pad) / scale, clipped to the image.
// pad_x / pad_y are the left / top padding in input pixels (they may be fractional, as ultralytics' letterbox has).
struct LetterboxInfo {
  float scale = 1.f;
  float pad_x = 0.f, pad_y = 0.f;
  int orig_w = 0, orig_h = 0;
};

}  // namespace qd
