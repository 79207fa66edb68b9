"""QAT fine-tuning: the decoded distillation loss, the fine-tuning loop and the command's flags."""

import pytest
import torch

from qdeploy.models.yolo import Detect
from qdeploy.qat import decoded_distill_loss, finetune, parse_args
from qdeploy.quant import TensorQuantizer, calibrate, quantize_model

NC = 3


@pytest.fixture
def detect():
    return Detect(NC, (8, 16, 32))


def levels(logit_obj=-20.0):
    """Three levels [1, 3, H, W, 5+nc] of zero logits except the objectness."""
    out = [torch.zeros(1, 3, n, n, 5 + NC) for n in (4, 2, 1)]
    for p in out:
        p[..., 4] = logit_obj
    return out


def perturbed(ref, level, anchor, channel, delta):
    out = [p.clone() for p in ref]
    out[level][0, anchor, 0, 0, channel] += delta
    return out


def test_identical_levels_give_zero(detect):
    torch.manual_seed(0)
    ref = [torch.randn(2, 3, n, n, 5 + NC) * 5 for n in (4, 2, 1)]
    assert float(decoded_distill_loss([p.clone() for p in ref], ref, detect)) == 0.0


def test_box_and_class_terms_are_weighted_by_teacher_objectness(detect):
    background = levels(-20.0)
    for channel in (0, 2, 5):  # x, w, first class
        assert float(decoded_distill_loss(perturbed(background, 0, 1, channel, 1.0), background, detect)) < 1e-9
    teacher = perturbed(background, 2, 2, 4, 25.0)  # objectness logit +5 at level 2 (one cell), anchor 2
    s1, s0 = torch.sigmoid(torch.tensor(1.0)), 0.5
    obj = torch.sigmoid(torch.tensor(5.0))
    anchor_w = 373 / 32  # wh in grid units: (2*sig)^2 * anchor / stride
    cells = 3
    expected = {0: ((2 * s1 - 0.5) - (2 * s0 - 0.5)) ** 2,
                2: ((2 * s1) ** 2 * anchor_w - (2 * s0) ** 2 * anchor_w) ** 2,
                5: (s1 - s0) ** 2 / NC}
    for channel, term in expected.items():
        loss = float(decoded_distill_loss(perturbed(teacher, 2, 2, channel, 1.0), teacher, detect))
        assert loss > 1e-3
        assert loss == pytest.approx(float(obj * term / cells), rel=1e-5)


def test_objectness_difference_counts_everywhere(detect):
    background = levels(-20.0)
    loss = float(decoded_distill_loss(perturbed(background, 0, 0, 4, 20.0), background, detect))  # 0 -> 0.5
    assert loss == pytest.approx(0.25 / (3 * 4 * 4), rel=1e-5)


def test_gradients_reach_the_student_only(detect):
    torch.manual_seed(0)
    teacher = [torch.randn(2, 3, n, n, 5 + NC).requires_grad_() for n in (4, 2, 1)]
    student = [(t.detach() + 0.1 * torch.randn_like(t)).requires_grad_() for t in teacher]
    decoded_distill_loss(student, teacher, detect).backward()
    assert all(s.grad is not None and s.grad.abs().sum() > 0 for s in student)
    assert all(t.grad is None for t in teacher)


def test_cli_flags():
    base = ["--model", "yolov5n", "--weights", "w.pt", "--data", "d", "--out", "o"]
    args = parse_args(base)
    assert args.distill_mode == "decoded" and args.task_weight == 1.0 and args.float_layers == ""
    args = parse_args(base + ["--distill-mode", "raw", "--task-weight", "0"])
    assert args.distill_mode == "raw" and args.task_weight == 0.0
    with pytest.raises(SystemExit):
        parse_args(base + ["--distill-mode", "logits"])
    assert parse_args(base + ["--asymmetric-activations"]).asymmetric_activations
    both = parse_args(base + ["--asymmetric-activations", "--learn-ranges"])  # LSQ+: scale and low end learned
    assert both.asymmetric_activations and both.learn_ranges
    with pytest.raises(SystemExit):  # detectors only (it would be ignored)
        parse_args(["--model", "bn", "--weights", "w.pt", "--out", "o", "--asymmetric-activations"])


def test_finetune_steps_scales_at_their_own_rate_and_keeps_the_ema(monkeypatch):
    """--range-lr-scale: the learned scales form their own Adam group at lr x scale; --warmup: the first step's rate
    is 0; --ema: the moving average is returned, its ranges frozen back into amax."""
    torch.manual_seed(0)
    model = quantize_model(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)), placement=1)
    calibrate(model, [torch.rand(2, 3, 8, 8)], method="max")
    start = model[0].weight.detach().clone()
    args = parse_args(["--model", "yolov5n", "--weights", "w", "--data", "d", "--out", "o", "--learn-ranges",
                       "--lr", "1e-3", "--range-lr-scale", "0.01", "--warmup", "2", "--ema", "0.5", "--ema-tau", "1"])
    rates, step = [], torch.optim.Adam.step

    def spy(self, *a, **k):
        rates.append([g["lr"] for g in self.param_groups])
        return step(self, *a, **k)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    x = torch.rand(2, 3, 8, 8)
    kept = finetune(model, 4, lambda _epoch: [x] * 4, lambda b: (model(b).pow(2).mean(), torch.zeros(())), args,
                    torch.device("cpu"))
    assert len(rates) == 4 and rates[0] == [0.0, 0.0]
    assert all(len(r) == 2 and r[1] == pytest.approx(0.01 * r[0]) and r[0] > 0 for r in rates[2:])
    assert kept is not model and not kept.training
    ema, last = kept[0].weight, model[0].weight
    assert not torch.equal(ema, last) and not torch.equal(ema, start)
    assert all(q.learned_scale is None for q in kept.modules() if isinstance(q, TensorQuantizer))


def test_finetune_learns_asymmetric_ranges():
    """--asymmetric-activations with --learn-ranges: the scale and the low end of each uint8 activation quantizer
    train with the weights (in the ranges' Adam group; the low end from what it clips) and freeze back into
    [amin, amax]."""
    from qdeploy.quant import activation_quantizers

    torch.manual_seed(0)
    model = quantize_model(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)), placement=1)
    x = torch.rand(2, 3, 8, 8) - 0.3
    calibrate(model, [x.clamp(min=-0.1)], method="max")  # a low end too high: it learns from what it clips
    enabled = [q for q in activation_quantizers(model) if q.enabled]
    for q in enabled:
        q.make_asymmetric()
    before = [(float(q.amin), float(q.amax)) for q in enabled]
    args = parse_args(["--model", "yolov5n", "--weights", "w", "--data", "d", "--out", "o", "--learn-ranges",
                       "--asymmetric-activations", "--lr", "1e-4"])
    target = torch.nn.functional.conv2d(x, model[0].weight.detach().clone(), model[0].bias.detach().clone())
    seen = []
    kept = finetune(model, 8, lambda _epoch: [x] * 8,
                    lambda b: (seen.append((float(enabled[0].learned_scale), float(enabled[0].learned_low))) or
                               (model(b) - target).pow(2).mean(), torch.zeros(())), args, torch.device("cpu"))
    assert seen[-1][1] < seen[0][1] and seen[-1][0] != seen[0][0]  # the low end goes down
    after = [q for q in activation_quantizers(kept) if q.enabled]
    assert all(q.asymmetric and q.learned_scale is None and q.learned_low is None for q in after)
    assert [(float(q.amin), float(q.amax)) for q in after] != before
