"""Image operations for detection training on uint8 CHW tensors, with boxes as [n, 4] pixel xyxy.

Everything is plain torch so the same code runs wherever torch does (PIL/cv2 are only used to decode files).
"""

import math

import torch
import torch.nn.functional as F

PAD_VALUE = 114  # ultralytics' letterbox grey


# Whether F.interpolate takes uint8 images directly, with and without antialiasing (torch >= 2.1 on CPU, with
# vectorized kernels); otherwise the image goes through float. Found out on first use, in each process.
_UINT8_INTERPOLATE = {True: None, False: None}


def _resize_uint8(img, h, w, shrink):
    if _UINT8_INTERPOLATE[shrink] is False or img.device.type != "cpu":
        return None
    try:
        y = F.interpolate(img.unsqueeze(0), size=(h, w), mode="bilinear", align_corners=False, antialias=shrink)
    except (RuntimeError, TypeError, NotImplementedError):
        _UINT8_INTERPOLATE[shrink] = False
        return None
    _UINT8_INTERPOLATE[shrink] = True
    return y[0]


def resize(img, h, w):
    """Bilinear resize of a uint8 CHW image (antialiased when shrinking, where this torch supports it)."""
    if img.shape[1:] == (h, w):
        return img
    shrink = h < img.shape[1] or w < img.shape[2]
    y = _resize_uint8(img, h, w, shrink)
    if y is not None:
        return y
    x = img.unsqueeze(0).float()
    try:
        y = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False, antialias=shrink)
    except TypeError:  # torch without antialias
        y = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    return y.round_().clamp_(0, 255).to(torch.uint8)[0]


def letterbox(img, size):
    """Scale to fit ``size`` x ``size`` keeping the aspect ratio, pad the rest with grey, centered.
    Returns the image, the scale ratio and the (left, top) padding, which map boxes into the new image."""
    _, h, w = img.shape
    r = min(size / h, size / w)
    nh, nw = round(h * r), round(w * r)
    img = resize(img, nh, nw)
    top, left = (size - nh) // 2, (size - nw) // 2
    out = torch.full((3, size, size), PAD_VALUE, dtype=torch.uint8)
    out[:, top:top + nh, left:left + nw] = img
    return out, r, (left, top)


def adjust_hsv(img, hue_turns, sat_gain, val_gain):
    """Rotate hue by ``hue_turns`` (about the grey axis) and scale HSV saturation and value by the gains, clipping
    them at 1. Saturation and value are changed with their exact RGB equivalents (V = max channel, S = 1 - min/max),
    which costs a few elementwise passes instead of a round trip through HSV."""
    x = img.float().mul_(1 / 255)
    if hue_turns:
        a = 2 * math.pi * hue_turns
        skew = torch.tensor([[0.0, -1, 1], [1, 0, -1], [-1, 1, 0]])
        rot = math.cos(a) * torch.eye(3) + (1 - math.cos(a)) / 3 + math.sin(a) / math.sqrt(3) * skew
        x = (rot @ x.view(3, -1)).view_as(x).clamp_(0, 1)
    mx = torch.maximum(torch.maximum(x[0], x[1]), x[2])
    mn = torch.minimum(torch.minimum(x[0], x[1]), x[2])
    k = (mx / (mx - mn).clamp_(min=1e-6)).clamp_(max=sat_gain)  # new S = S * k <= 1
    v = mx.clamp(min=1e-6).reciprocal_().clamp_(max=val_gain)  # new V = V * gain <= 1
    for c in x:  # per channel: same-shape in-place ops are much faster than broadcasting over [3, H, W]
        c.sub_(mx).mul_(k).add_(mx).mul_(v)
    return x.mul_(255).round_().clamp_(0, 255).to(torch.uint8)


def hsv_jitter(img, gen, hgain=0.015, sgain=0.7, vgain=0.4):
    """Colour augmentation with ultralytics' default strengths: saturation and value times 1 +- sgain / vgain, and
    hue rotated by up to +- hgain turns (ultralytics scales the hue instead; a rotation treats all hues alike)."""
    r = torch.rand(3, generator=gen) * 2 - 1
    return adjust_hsv(img, float(r[0]) * hgain, 1 + float(r[1]) * sgain, 1 + float(r[2]) * vgain)


def hflip(img, boxes):
    w = img.shape[2]
    boxes = boxes.clone()
    boxes[:, [0, 2]] = w - boxes[:, [2, 0]]
    return img.flip(2), boxes


def clip_boxes(boxes, classes, w, h, min_size=2.0, min_visible=0.2):
    """Clip to the image and drop boxes that became slivers or lost most of their area."""
    area0 = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    b = boxes.clone()
    b[:, [0, 2]] = b[:, [0, 2]].clamp(0, w)
    b[:, [1, 3]] = b[:, [1, 3]].clamp(0, h)
    bw, bh = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    keep = (bw > min_size) & (bh > min_size) & (bw * bh > min_visible * area0.clamp(min=1e-6))
    return b[keep], classes[keep]


def mosaic(items, size, gen):
    """Four (image, boxes, classes) tiles around a random centre of a 2*size canvas, then a random-scale crop
    around that centre resized back to ``size``: objects at varied scales and positions, with partial objects."""
    canvas = torch.full((3, 2 * size, 2 * size), PAD_VALUE, dtype=torch.uint8)
    xc, yc = (int(size * (0.5 + torch.rand(1, generator=gen).item())) for _ in range(2))
    all_boxes, all_classes = [], []
    for k, (img, boxes, classes) in enumerate(items):
        img, r, (left, top) = letterbox(img, size)
        _, h, w = img.shape
        # tile k's corner touching the centre: 0 top-left, 1 top-right, 2 bottom-left, 3 bottom-right
        x0 = xc - w if k in (0, 2) else xc
        y0 = yc - h if k in (0, 1) else yc
        cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x0 + w, 2 * size), min(y0 + h, 2 * size)
        canvas[:, cy0:cy1, cx0:cx1] = img[:, cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
        b = boxes * r + torch.tensor([x0 + left, y0 + top, x0 + left, y0 + top], dtype=torch.float32)
        all_boxes.append(b)
        all_classes.append(classes)
    crop = int(size * (0.6 + 0.8 * torch.rand(1, generator=gen).item()))
    x0 = min(max(xc - crop // 2, 0), 2 * size - crop)
    y0 = min(max(yc - crop // 2, 0), 2 * size - crop)
    img = resize(canvas[:, y0:y0 + crop, x0:x0 + crop], size, size)
    boxes = (torch.cat(all_boxes) - torch.tensor([x0, y0, x0, y0], dtype=torch.float32)) * (size / crop)
    return (img, *clip_boxes(boxes, torch.cat(all_classes), size, size))
