"""QAT fine-tuning: the decoded distillation loss and the command's flags."""

import pytest
import torch

from qdeploy.models.yolo import Detect
from qdeploy.qat import decoded_distill_loss, parse_args

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
