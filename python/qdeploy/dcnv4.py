"""DCNv4 in pure PyTorch, and its ONNX export as qdeploy's plugin op ``ai.qdeploy::DCNv4`` (version 1).

The forward op of OpenGVLab/DCNv4 (``DCNv4Function``), written with tensor indexing so that it runs on any device
and dtype without the official CUDA extension. Layout and semantics (plugins/dcnv4/dcnv4.h says the same):

- ``value`` ``[N, H, W, G*D]`` channels last; ``offset_mask`` ``[N, Ho, Wo, P]``: per group ``g`` at ``g*3K``, K
  ``(dx, dy)`` pairs then K raw mask values (no softmax); ``P >= 3*G*K`` (the official module pads it to a multiple
  of 8); output ``[N, Ho, Wo, G*D]``.
- ``K = kernel_h*kernel_w - remove_center``; points run kernel-x outer, kernel-y inner, the centre skipped when
  ``remove_center``.
- point ``(i, j)`` samples ``x = ox*stride_w - pad_w + cw + offset_scale*(i*dilation_w + dx - cw)`` with
  ``cw = (dilation_w*(kernel_w-1)) >> 1`` (the same for y), bilinearly with zero padding.

The export writes one node ``DCNv4`` of domain ``ai.qdeploy`` with the official op's argument names as attributes
(``kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, group, group_channels,
offset_scale, im2col_step, remove_center``); ``qdeploy`` maps it to its built-in plugin.
"""

import torch

DOMAIN = "ai.qdeploy"
OP_TYPE = "DCNv4"
VERSION = 1
ATTRS = ("kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w", "group",
         "group_channels", "offset_scale", "im2col_step", "remove_center")


def output_size(size, kernel, stride, pad, dilation):
    return (size + 2 * pad - (dilation * (kernel - 1) + 1)) // stride + 1


def dcnv4(value, offset_mask, kernel_h=3, kernel_w=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1, dilation_h=1,
          dilation_w=1, group=4, group_channels=16, offset_scale=1.0, im2col_step=256, remove_center=0):
    """The DCNv4 forward op (arguments as the official ``DCNv4Function.apply`` takes them, after the tensors)."""
    del im2col_step  # the official op's batch chunk: no effect on the result
    n, h, w, c = value.shape
    g, d = group, group_channels
    if c != g * d:
        raise ValueError(f"value has {c} channels; group {g} x group_channels {d} = {g * d}")
    ho = output_size(h, kernel_h, stride_h, pad_h, dilation_h)
    wo = output_size(w, kernel_w, stride_w, pad_w, dilation_w)
    points = [(i, j) for i in range(kernel_w) for j in range(kernel_h)
              if not (remove_center and i == kernel_w // 2 and j == kernel_h // 2)]
    k = len(points)
    if tuple(offset_mask.shape[:3]) != (n, ho, wo) or offset_mask.shape[3] < 3 * g * k:
        raise ValueError(f"offset_mask is {tuple(offset_mask.shape)}; expected [{n}, {ho}, {wo}, >= {3 * g * k}]")
    dev, acc = value.device, torch.float32 if value.dtype in (torch.float16, torch.bfloat16) else value.dtype
    om = offset_mask[..., :3 * g * k].reshape(n, ho, wo, g, 3 * k).to(acc)
    dx, dy = om[..., 0:2 * k:2], om[..., 1:2 * k:2]          # [N, Ho, Wo, G, K]
    mask = om[..., 2 * k:3 * k]
    px = torch.tensor([i * dilation_w for i, _ in points], dtype=acc, device=dev)
    py = torch.tensor([j * dilation_h for _, j in points], dtype=acc, device=dev)
    cw, ch = (dilation_w * (kernel_w - 1)) >> 1, (dilation_h * (kernel_h - 1)) >> 1
    x0 = (torch.arange(wo, device=dev) * stride_w - pad_w + cw).to(acc) - cw * offset_scale
    y0 = (torch.arange(ho, device=dev) * stride_h - pad_h + ch).to(acc) - ch * offset_scale
    x = x0.view(1, 1, wo, 1, 1) + (px + dx) * offset_scale
    y = y0.view(1, ho, 1, 1, 1) + (py + dy) * offset_scale
    valid = (x > -1) & (y > -1) & (x < w) & (y < h)
    xl, yl = torch.floor(x), torch.floor(y)
    lx, ly = x - xl, y - yl
    hx, hy = 1 - lx, 1 - ly
    xl, yl = xl.long(), yl.long()
    v = value.reshape(n, h * w, g, d).to(acc)
    bi = torch.arange(n, device=dev).view(n, 1, 1, 1, 1)
    gi = torch.arange(g, device=dev).view(1, 1, 1, g, 1)

    def corner(yy, xx, weight):
        inside = valid & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        idx = yy.clamp(0, h - 1) * w + xx.clamp(0, w - 1)
        return v[bi, idx, gi] * (weight * inside)[..., None]     # [N, Ho, Wo, G, K, D]

    s = corner(yl, xl, hy * hx) + corner(yl, xl + 1, hy * lx) + corner(yl + 1, xl, ly * hx) + \
        corner(yl + 1, xl + 1, ly * lx)
    out = (s * mask[..., None]).sum(dim=4)                       # [N, Ho, Wo, G, D]
    return out.reshape(n, ho, wo, g * d).to(value.dtype)


class DCNv4Function(torch.autograd.Function):
    """``dcnv4`` that exports to ONNX as one ``ai.qdeploy::DCNv4`` node (torch.onnx.export, the TorchScript exporter:
    ``dynamo=False`` on torch versions where the dynamo exporter is the default; pass
    ``custom_opsets={"ai.qdeploy": 1}``)."""

    @staticmethod
    def forward(ctx, value, offset_mask, *args):  # noqa: D102 (the arguments of dcnv4, in its order)
        if torch.onnx.is_in_onnx_export():
            # symbolic() writes the node; a trace of the indexing inside dcnv4 only trips the TorchScript exporter's
            # graph passes (torch 1.13's peephole pass fails on it), so trace a shape-only stand-in.
            kh, kw, sh, sw, ph, pw, dh, dw = args[:8]
            n, h, w, c = (int(s) for s in value.shape)
            return torch.zeros(n, output_size(h, kh, sh, ph, dh), output_size(w, kw, sw, pw, dw), c,
                               dtype=value.dtype)
        return dcnv4(value, offset_mask, *args)

    @staticmethod
    def symbolic(g, value, offset_mask, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w,
                 group, group_channels, offset_scale, im2col_step, remove_center):  # noqa: D102
        return g.op(f"{DOMAIN}::{OP_TYPE}", value, offset_mask, kernel_h_i=kernel_h, kernel_w_i=kernel_w,
                    stride_h_i=stride_h, stride_w_i=stride_w, pad_h_i=pad_h, pad_w_i=pad_w, dilation_h_i=dilation_h,
                    dilation_w_i=dilation_w, group_i=group, group_channels_i=group_channels,
                    offset_scale_f=float(offset_scale), im2col_step_i=im2col_step, remove_center_i=int(remove_center))
