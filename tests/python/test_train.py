"""Data reading, the YOLO loss, and short runs of the training, classifier and QAT commands."""

import os

import pytest
import torch

from qdeploy import data
from qdeploy.loss import YoloLoss, bbox_ciou
from qdeploy.models import build_model


def test_coco_dataset_letterbox_and_collate(synth_data):
    train, val = data.detection_splits(synth_data, imgsz=64, mosaic=0.0)
    assert len(train) + len(val) == 8 and len(val) == 1 and train.num_classes == 10
    img, labels, image_id = val[0]
    assert img.shape == (3, 64, 64) and img.dtype == torch.uint8
    assert labels.shape[1] == 5 and labels[:, 0].max() <= 9 and (labels[:, 1:] > 0).all() and (labels[:, 1:] <= 1).all()
    # Without augmentation, a 128-pixel image halves: normalized boxes equal the annotation divided by 128.
    ann = val.labels[0]
    cx = (ann[:, 1] + ann[:, 3]) / 2 / 128
    torch.testing.assert_close(labels[:, 1], cx)
    imgs, targets, ids = data.collate([train[0], train[1]])
    assert imgs.shape == (2, 3, 64, 64) and targets.shape[1] == 6 and set(targets[:, 0].tolist()) <= {0.0, 1.0}


def test_augmentations_keep_boxes_valid(synth_data):
    train, _ = data.detection_splits(synth_data, imgsz=64, mosaic=1.0)
    for i in range(len(train)):
        img, labels, _ = train[i]
        assert img.shape == (3, 64, 64)
        xywh = labels[:, 1:]
        assert ((xywh[:, :2] - xywh[:, 2:] / 2) >= -1e-5).all() and ((xywh[:, :2] + xywh[:, 2:] / 2) <= 1 + 1e-5).all()


def test_hsv_adjustment_matches_hsv_arithmetic():
    import colorsys

    from qdeploy.augment import adjust_hsv

    img = torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8)
    assert torch.equal(adjust_hsv(img, 0.0, 1.0, 1.0), img)
    pixel = torch.tensor([200, 100, 50], dtype=torch.uint8).view(3, 1, 1)
    h, s, v = colorsys.rgb_to_hsv(200 / 255, 100 / 255, 50 / 255)
    for sat, val in [(0.5, 1.0), (1.0, 0.5), (3.0, 1.0), (1.0, 3.0)]:  # gains past the limits clip S and V at 1
        expect = [round(c * 255) for c in colorsys.hsv_to_rgb(h, min(s * sat, 1), min(v * val, 1))]
        assert adjust_hsv(pixel, 0.0, sat, val).flatten().tolist() == expect
    grey = torch.full((3, 1, 1), 90, dtype=torch.uint8)
    assert torch.equal(adjust_hsv(grey, 0.01, 1.0, 1.0), grey)  # hue rotation leaves greys alone


def test_ciou_of_identical_boxes_is_one():
    b = torch.tensor([[5.0, 5.0, 2.0, 3.0]])
    assert float(bbox_ciou(b, b)) == pytest.approx(1.0, abs=1e-5)
    assert float(bbox_ciou(b, b + torch.tensor([[4.0, 0, 0, 0]]))) < 0


def test_training_steps_lower_the_loss():
    torch.manual_seed(0)
    model = build_model("yolov5n", 10).train()
    loss_fn = YoloLoss(model.detect, imgsz=96)
    imgs = torch.rand(2, 3, 96, 96)
    targets = torch.tensor([[0, 3, 0.5, 0.5, 0.3, 0.4], [0, 7, 0.2, 0.3, 0.1, 0.1], [1, 1, 0.7, 0.6, 0.5, 0.2]])
    assignments = loss_fn.build_targets(model(imgs), targets)
    assert all(len(a[0]) > 0 for a in assignments[:2])  # small and medium boxes match anchors on P3/P4
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(8):
        loss, parts = loss_fn(model(imgs), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0]  # train-mode BN on two images is noisy; the trend is what counts


def test_train_export_and_qat_commands(synth_data, tmp_path):
    from qdeploy import export, qat, train

    out = tmp_path / "run"
    train.main(["--model", "yolov5n", "--data", str(synth_data), "--epochs", "1", "--batch", "4", "--imgsz", "64",
                "--workers", "0", "--out", str(out)])
    assert (out / "best.pt").is_file() and (out / "last.pt").is_file()
    export.main(["--model", "yolov5n", "--nc", "10", "--weights", str(out / "best.pt"), "--imgsz", "64",
                 "--out", str(tmp_path / "fp32.onnx")])
    # From the exported ONNX's weights, with learned quantizer ranges (LSQ), warmup and an EMA of the weights.
    qat.main(["--model", "yolov5n", "--weights", str(tmp_path / "fp32.onnx"), "--data", str(synth_data), "--imgsz",
              "64", "--batch", "4", "--calib-batches", "1", "--epochs", "1", "--max-batches", "2", "--workers", "0",
              "--calib-method", "percentile", "--learn-ranges", "--range-lr-scale", "0.01", "--warmup", "1",
              "--ema", "0.9", "--out", str(tmp_path / "qat")])
    assert (tmp_path / "qat" / "qat.onnx").is_file() and (tmp_path / "qat" / "qat.pt").is_file()
    export.main(["--model", "yolov5n", "--nc", "10", "--weights", str(tmp_path / "qat" / "qat.pt"), "--placement", "1",
                 "--imgsz", "64", "--head-only", "--out", str(tmp_path / "qat_heads.onnx")])
    assert (tmp_path / "qat_heads.onnx").is_file()


FMNIST = data.FASHION_MNIST_DIR


@pytest.mark.skipif(not os.path.isdir(FMNIST), reason=f"Fashion-MNIST not installed at {FMNIST}")
def test_fashion_mnist_reading_and_classifier_input():
    images, labels = data.load_fashion_mnist("test")
    assert images.shape == (10000, 28, 28) and labels.bincount().tolist() == [1000] * 10
    x = data.to_classifier_input(images[:2])
    assert x.shape == (2, 3, 32, 32) and float(x.max()) <= 1.0
    assert float(x[:, :, :2].abs().sum()) == 0 and torch.equal(x[:, 0], x[:, 2])
    y = data.augment_classifier_batch(x, torch.Generator().manual_seed(0))
    torch.testing.assert_close(y.sum((1, 2, 3)), x.sum((1, 2, 3)))  # shifts and flips only move pixels


def test_idx_reader_rejects_truncated_files(tmp_path):
    bad = tmp_path / "bad-idx3-ubyte"
    bad.write_bytes(b"\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02" + b"\x00" * 5)
    with pytest.raises(ValueError, match="header says 8 bytes"):
        data.read_idx(bad)
