"""The YOLOv5 loss: ultralytics' target assignment, CIoU box loss and BCE objectness / classification.

Assignment: a target is matched to every anchor whose width and height ratios to it are all within ``anchor_t``
(4.0), at its own grid cell and at the two neighbouring cells nearest to its centre (the centre offset is predicted
in (-0.5, 1.5), so neighbours can reach it). Objectness is trained towards the CIoU of each matched prediction;
level losses are weighted by ``balance`` (P3 4.0, P4 1.0, P5 0.4) because smaller strides have more cells.
"""

import math

import torch
from torch import nn

# ultralytics' hyp.scratch-low gains, before scaling by number of levels, classes and image size.
BOX_GAIN, OBJ_GAIN, CLS_GAIN = 0.05, 1.0, 0.5
BALANCE = (4.0, 1.0, 0.4)
ANCHOR_T = 4.0


def bbox_ciou(box1, box2, eps=1e-7):
    """Complete IoU of matching rows of two [n, 4] (cx, cy, w, h) sets: IoU minus a centre-distance term and an
    aspect-ratio term, so that non-overlapping and misshaped boxes still get a useful gradient."""
    (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.unbind(-1), box2.unbind(-1)
    b1x1, b1x2, b1y1, b1y2 = x1 - w1 / 2, x1 + w1 / 2, y1 - h1 / 2, y1 + h1 / 2
    b2x1, b2x2, b2y1, b2y2 = x2 - w2 / 2, x2 + w2 / 2, y2 - h2 / 2, y2 + h2 / 2
    inter = (torch.min(b1x2, b2x2) - torch.max(b1x1, b2x1)).clamp(0) * \
            (torch.min(b1y2, b2y2) - torch.max(b1y1, b2y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = torch.max(b1x2, b2x2) - torch.min(b1x1, b2x1)
    ch = torch.max(b1y2, b2y2) - torch.min(b1y1, b2y1)
    c2 = cw ** 2 + ch ** 2 + eps
    rho2 = (x2 - x1) ** 2 + (y2 - y1) ** 2
    v = (4 / math.pi ** 2) * (torch.atan(w2 / (h2 + eps)) - torch.atan(w1 / (h1 + eps))) ** 2
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


class YoloLoss:
    """Callable: ``loss, parts = YoloLoss(detect, imgsz)(levels, targets)``.

    ``levels``: the Detect outputs of training mode, [N, na, H, W, 5+nc] per level. ``targets``: [n, 6] rows of
    (image index, class, cx, cy, w, h) normalized to the image. ``loss`` is summed over parts and scaled by the
    batch size (ultralytics' convention, which the learning rates assume); ``parts`` is (box, obj, cls) detached.
    """

    def __init__(self, detect, imgsz=640):
        self.nc, self.na, self.nl = detect.nc, detect.na, detect.nl
        scale = 3 / self.nl
        self.box_gain = BOX_GAIN * scale
        self.cls_gain = CLS_GAIN * self.nc / 80 * scale
        self.obj_gain = OBJ_GAIN * (imgsz / 640) ** 2 * scale
        self.anchors = (detect.anchors / detect.stride.view(-1, 1, 1)).detach()  # in grid cells of each level
        self.bce = nn.BCEWithLogitsLoss()

    def __call__(self, levels, targets):
        device = levels[0].device
        self.anchors = self.anchors.to(device)
        targets = targets.to(device)
        lbox, lobj, lcls = (torch.zeros(1, device=device) for _ in range(3))
        for i, (p, (b, a, gj, gi, tbox, tcls)) in enumerate(zip(levels, self.build_targets(levels, targets))):
            tobj = torch.zeros(p.shape[:4], dtype=p.dtype, device=device)
            if len(b):
                pxy, pwh, _, pcls = p[b, a, gj, gi].float().split((2, 2, 1, self.nc), 1)
                pxy = pxy.sigmoid() * 2 - 0.5
                pwh = (pwh.sigmoid() * 2) ** 2 * self.anchors[i][a]
                iou = bbox_ciou(torch.cat((pxy, pwh), 1), tbox)
                lbox += (1.0 - iou).mean()
                tobj[b, a, gj, gi] = iou.detach().clamp(0).to(tobj.dtype)
                if self.nc > 1:
                    t = torch.zeros_like(pcls)
                    t[torch.arange(len(b), device=device), tcls] = 1.0
                    lcls += self.bce(pcls, t)
            lobj += self.bce(p[..., 4].float(), tobj.float()) * BALANCE[i]
        lbox, lobj, lcls = lbox * self.box_gain, lobj * self.obj_gain, lcls * self.cls_gain
        bs = levels[0].shape[0]
        return (lbox + lobj + lcls).sum() * bs, torch.cat((lbox, lobj, lcls)).detach()

    def build_targets(self, levels, targets):
        """Per level: (image, anchor, grid y, grid x) indices of matched predictions, their target boxes
        (offset within the cell, size) in grid units, and classes."""
        device = targets.device
        nt = targets.shape[0]
        ai = torch.arange(self.na, device=device).float().view(self.na, 1).repeat(1, nt)
        t_all = torch.cat((targets.repeat(self.na, 1, 1), ai[..., None]), 2)  # [na, nt, 7]: ..., anchor index
        g = 0.5
        offsets = torch.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]], device=device).float() * g
        out = []
        for i, p in enumerate(levels):
            ny, nx = p.shape[2], p.shape[3]
            gain = torch.tensor([1, 1, nx, ny, nx, ny, 1], device=device, dtype=torch.float32)
            t = t_all * gain
            if nt:
                r = t[..., 4:6] / self.anchors[i][:, None]
                t = t[torch.max(r, 1 / r).max(2)[0] < ANCHOR_T]
                gxy = t[:, 2:4]
                gxi = gain[[2, 3]] - gxy
                j, k = ((gxy % 1 < g) & (gxy > 1)).T
                l, m = ((gxi % 1 < g) & (gxi > 1)).T
                mask = torch.stack((torch.ones_like(j), j, k, l, m))
                t = t.repeat((5, 1, 1))[mask]
                off = (torch.zeros_like(gxy)[None] + offsets[:, None])[mask]
            else:
                t, off = t_all[0], 0
            b, c = t[:, 0].long(), t[:, 1].long()
            gxy, gwh, a = t[:, 2:4], t[:, 4:6], t[:, 6].long()
            gij = (gxy - off).long()
            gi = gij[:, 0].clamp(0, nx - 1)
            gj = gij[:, 1].clamp(0, ny - 1)
            out.append((b, a, gj, gi, torch.cat((gxy - torch.stack((gi, gj), 1), gwh), 1), c))
        return out
