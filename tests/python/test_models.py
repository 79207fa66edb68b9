"""Model structure: ultralytics parameter counts and FLOPs, output shapes, BN folding, the seed-004 classifiers."""

import pytest
import torch
from torch import nn

from qdeploy.models import build_model
from qdeploy.models.classifier import ModelBN, ModelGN
from qdeploy.models.flops import count_macs, gflops
from qdeploy.models.fuse import fuse_conv_bn


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# (parameters as built, parameters after Conv+BN folding) at nc=80. ultralytics prints the first in its model
# summary and the second after "Fusing layers..." (e.g. yolov5s v6.0: 7,235,389 and 7,225,885; v5.0: 7,276,605 and
# 7,266,973). The difference is one bias per BN channel minus the BN's weight and bias.
PARAMS = {
    "yolov5n": (1_872_157, 1_867_405),
    "yolov5s": (7_235_389, 7_225_885),
    "yolov5m": (21_190_557, 21_172_173),
    "yolov5s-v5.0": (7_276_605, 7_266_973),
}


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_parameter_counts_match_ultralytics(name):
    model = build_model(name, 80)
    built, fused = PARAMS[name]
    assert n_params(model) == built
    assert n_params(fuse_conv_bn(model)) == fused


def test_layer_layout_matches_ultralytics():
    model = build_model("yolov5s", 80)
    names = [type(m).__name__ for m in model.model]
    assert names[:10] == ["Conv", "Conv", "C3", "Conv", "C3", "Conv", "C3", "Conv", "C3", "SPPF"]
    assert names[24] == "Detect" and len(names) == 25
    assert model.model[0].conv.kernel_size == (6, 6) and model.model[0].conv.stride == (2, 2)
    assert [len(model.model[i].m) for i in (2, 4, 6, 8)] == [1, 2, 3, 1]
    bn = model.model[0].bn
    assert bn.eps == 1e-3 and bn.momentum == 0.03
    assert isinstance(model.model[0].act, nn.SiLU)
    v5 = build_model("yolov5s-v5.0", 80)
    assert [type(v5.model[i]).__name__ for i in (0, 8, 9)] == ["Focus", "SPP", "C3"]
    assert "model.24.m.0.weight" in model.state_dict()


def test_gflops_at_640():
    # ultralytics reports 16.5 (yolov5s) and 4.5 (yolov5n) GFLOPs = 2 * MACs of the convs. Every feature map of a
    # 320 input is exactly a quarter of the 640 one (all sizes divide by 32), so MACs scale by exactly 4.
    macs_s = count_macs(build_model("yolov5s", 80), (1, 3, 320, 320)) * 4
    assert macs_s == pytest.approx(8.22e9, rel=0.005)
    assert 2 * macs_s / 1e9 == pytest.approx(16.5, abs=0.15)
    assert gflops(build_model("yolov5n", 80), 320) * 4 == pytest.approx(4.5, abs=0.1)


def test_detect_outputs_per_mode():
    model = build_model("yolov5n", 10)
    x = torch.rand(2, 3, 128, 128)
    levels = model.train()(x)
    assert [tuple(lv.shape) for lv in levels] == [(2, 3, 16, 16, 15), (2, 3, 8, 8, 15), (2, 3, 4, 4, 15)]
    model.eval()
    with torch.no_grad():
        out = model(x)
        raw = model.raw_levels(x)
        model.detect.head_only = True
        heads = model(x)
        model.detect.head_only = False
    assert tuple(out.shape) == (2, 3 * (16 * 16 + 8 * 8 + 4 * 4), 15)
    assert [tuple(h.shape) for h in heads] == [(2, 45, 16, 16), (2, 45, 8, 8), (2, 45, 4, 4)]
    # The decode, written out independently: level P4, anchor 1, cell (y=2, x=5).
    p = raw[1][0, 1, 2, 5].sigmoid()
    stride, anchor = 16, torch.tensor([62.0, 45.0])
    expect_xy = (p[:2] * 2 - 0.5 + torch.tensor([5.0, 2.0])) * stride
    expect_wh = (p[2:4] * 2) ** 2 * anchor
    row = out[0, 3 * 16 * 16 + 1 * 8 * 8 + 2 * 8 + 5]
    torch.testing.assert_close(row[:2], expect_xy)
    torch.testing.assert_close(row[2:4], expect_wh)
    torch.testing.assert_close(row[4:], p[4:])


def test_fusing_keeps_outputs():
    torch.manual_seed(0)
    model = build_model("yolov5n", 10)
    model.train()(torch.rand(4, 3, 64, 64))  # give BN non-trivial running statistics
    model.eval()
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        ref = model(x)
        torch.testing.assert_close(fuse_conv_bn(model)(x), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cls", [ModelBN, ModelGN])
def test_classifier_shapes_and_one_step(cls):
    torch.manual_seed(0)
    model = cls(10)
    convs = [m for m in model.cnn if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [64, 128, 256, 512] and all(c.stride == (2, 2) for c in convs)
    if cls is ModelGN:
        assert all(m.num_groups == 8 for m in model.cnn if isinstance(m, nn.GroupNorm))
    x, y = torch.rand(16, 3, 32, 32), torch.randint(0, 10, (16,))
    assert tuple(model(x).shape) == (16, 10)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(3):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
