"""FlashInternImage (python/qdeploy/flash_intern_image.py): the T configuration's size, the export with DCNv4 as a
custom-domain node (separate and fused value/offset projections), qdeploy's CPU reference against PyTorch on the
exported mini model, and `qdeploy classify` on it (text and JSON output, errors)."""

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from qdeploy.dcnv4 import DOMAIN, OP_TYPE
from qdeploy.flash_intern_image import export_onnx, flash_intern_image, randomize_offsets, set_fused

ROOT = Path(__file__).resolve().parents[2]
QDEPLOY = Path(os.environ.get("QDEPLOY_BIN", ROOT / "build" / "qdeploy"))
needs_cli = pytest.mark.skipif(not QDEPLOY.exists(), reason=f"{QDEPLOY} not built (scripts/build.sh)")
SIZE = 64  # the mini model's input: 16x16 tokens in the first stage, 2x2 in the last
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def mini():
    torch.manual_seed(0)
    return randomize_offsets(flash_intern_image("mini", 10, layer_scale=1.0), seed=1).eval()


def test_t_configuration_has_the_official_size():
    model = flash_intern_image("t")
    assert sum(p.numel() for p in model.parameters()) == 29_815_528  # the official model's count (30M)
    stages = [(len(s.blocks), s.blocks[0].dcn.group, s.blocks[0].dcn.channels) for s in model.levels]
    assert stages == [(4, 4, 64), (4, 8, 128), (18, 16, 256), (4, 32, 512)]


def test_fmnist_configuration_trains_through_dcnv4():
    # qdeploy.train_cls --model fii: gradients must reach the offsets (the op's autograd Function only exports).
    torch.manual_seed(0)
    model = flash_intern_image("fmnist", 10)
    assert sum(p.numel() for p in model.parameters()) == 427_930
    loss = torch.nn.functional.cross_entropy(model(torch.rand(4, 3, 32, 32)), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    grad = model.levels[0].blocks[0].dcn.offset_mask.weight.grad
    assert grad is not None and grad.abs().max() > 0


def test_fused_projections_compute_the_same(mini):
    x = torch.randn(2, 3, SIZE, SIZE)
    with torch.no_grad():
        a = mini(x)
        b = set_fused(mini, True)(x)
        set_fused(mini, False)
    assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()


def export(tmp_path, model, fused):
    path = tmp_path / f"fii_mini{'_fused' if fused else ''}.onnx"
    export_onnx(model, path, imgsz=SIZE, fused=fused, dynamic=True)
    return path


def test_export_writes_dcnv4_nodes_and_one_matmul_per_pair_when_fused(tmp_path, mini):
    import onnx

    graphs = {f: onnx.load(str(export(tmp_path, mini, f))).graph for f in (False, True)}
    ops = {f: Counter(n.op_type for n in g.node) for f, g in graphs.items()}
    n_dcn = sum(len(s.blocks) for s in mini.levels)
    for g in graphs.values():
        dcn = [n for n in g.node if n.op_type == OP_TYPE]
        assert len(dcn) == n_dcn and all(n.domain == DOMAIN for n in dcn)
    assert ops[False]["MatMul"] - ops[True]["MatMul"] == n_dcn
    assert ops[True]["Slice"] - ops[False]["Slice"] == 2 * n_dcn
    # Fused: both DCNv4 inputs come (through a Reshape) from Slices of one MatMul + Add.
    g = graphs[True]
    producer = {o: n for n in g.node for o in n.output}
    for n in (n for n in g.node if n.op_type == OP_TYPE):
        roots = set()
        for name in n.input:
            p = producer[name]
            assert p.op_type == "Reshape", p.op_type
            s = producer[p.input[0]]
            assert s.op_type == "Slice", s.op_type
            roots.add(s.input[0])
        assert len(roots) == 1 and producer[roots.pop()].op_type == "Add"


def run_reference(tmp_path, model_path, x):
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run([str(QDEPLOY), "run", str(model_path), "--input", f"input={tmp_path / 'x.npy'}",
                        "--output-dir", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return np.load(tmp_path / "out" / "output.npy")


@needs_cli
@pytest.mark.parametrize("fused", [False, True], ids=["separate", "fused"])
def test_reference_matches_pytorch(tmp_path, mini, fused):
    x = torch.randn(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = mini(x).numpy()
    got = run_reference(tmp_path, export(tmp_path, mini, fused), x.numpy())
    assert got.shape == want.shape == (2, 10)
    rng = float(want.max() - want.min())
    err = float(np.abs(got - want).max())
    print(f"{'fused' if fused else 'separate'}: max|qdeploy - pytorch| {err:.3g}, logits range {rng:.3g}")
    assert err <= 1e-4 * rng, (err, rng)


def write_images(folder, n, seed):
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(n, SIZE, SIZE, 3), dtype=np.uint8)
    for i in range(n):
        Image.fromarray(pixels[i]).save(folder / f"img{i}.png")
    return pixels


def classify(tmp_path, *args):
    return subprocess.run([str(QDEPLOY), "classify", *map(str, args)], capture_output=True, text=True, cwd=tmp_path)


@needs_cli
def test_classify_matches_pytorch_text_and_json(tmp_path, mini):
    model = export(tmp_path, mini, True)
    pixels = write_images(tmp_path / "imgs", 3, seed=5)
    names = [f"class_{i}" for i in range(10)]
    (tmp_path / "labels.txt").write_text("\n".join(names) + "\n")
    # Images of the network's size, resize=none: the input is exactly (pixel / 255 - mean) / std, RGB, NCHW.
    spec = "resize=none,mean=" + ",".join(map(str, MEAN)) + ",std=" + ",".join(map(str, STD))
    x = (torch.from_numpy(pixels).float() / 255 - torch.tensor(MEAN)) / torch.tensor(STD)
    with torch.no_grad():
        want = mini(x.permute(0, 3, 1, 2).contiguous()).numpy()
    r = classify(tmp_path, model, tmp_path / "imgs", "--labels", tmp_path / "labels.txt", "--top", 3, "--json",
                 "--batch", 2, "--preprocess", spec)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["classes"] == 10 and j["input"] == {"width": SIZE, "height": SIZE} and j["batch"] == 2
    assert set(j["timings_ms"]) == {"build", "decode_per_image", "preprocess_per_image", "inference_per_batch"}
    assert [Path(im["file"]).name for im in j["images"]] == ["img0.png", "img1.png", "img2.png"]
    rng = float(want.max() - want.min())
    for row, im in zip(want, j["images"]):
        order = np.argsort(-row, kind="stable")[:3]
        assert [t["class_id"] for t in im["top"]] == order.tolist()
        assert [t["label"] for t in im["top"]] == [names[k] for k in order]
        assert np.allclose([t["score"] for t in im["top"]], row[order], atol=1e-4 * rng)
        p = np.exp(row - row.max())
        p /= p.sum()
        assert np.allclose([t["prob"] for t in im["top"]], p[order], atol=1e-4)
    # Text: one block per image with its best class first, and the timings line.
    r = classify(tmp_path, model, tmp_path / "imgs" / "img1.png", "--labels", tmp_path / "labels.txt", "--top", 2,
                 "--preprocess", spec)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "10 classes" in lines[0] and "input 64x64" in lines[0] and "crop" not in lines[0]
    assert lines[1].endswith("img1.png")
    best = int(np.argmax(want[1]))
    assert lines[2].split()[:2] == [str(best), names[best]]
    assert len(lines) == 5 and "inference" in lines[4] and "ms" in lines[4]
    # The imagenet preset (short side to 73, centre 64x64) runs and says what it did.
    r = classify(tmp_path, model, tmp_path / "imgs" / "img0.png", "--preprocess", "imagenet", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["preprocess"].startswith("resize=center-crop,crop=0.875,mean=0.485")


@needs_cli
def test_classify_errors(tmp_path, mini):
    model = export(tmp_path, mini, False)
    write_images(tmp_path / "imgs", 1, seed=6)
    (tmp_path / "empty").mkdir()
    (tmp_path / "two.txt").write_text("a\nb\n")
    (tmp_path / "twice.txt").write_text("a\na\n")
    (tmp_path / "bad.png").write_bytes(b"not a png")
    cases = [
        ((tmp_path / "absent.png",), "neither an image file nor a folder"),
        ((tmp_path / "empty",), "no .jpg/.jpeg/.png images"),
        ((tmp_path / "bad.png",), "bad.png"),
        ((tmp_path / "imgs", "--top", 0), "--top must be at least 1"),
        ((tmp_path / "imgs", "--labels", tmp_path / "two.txt"), "lists 2 class names; the model has 10 classes"),
        ((tmp_path / "imgs", "--labels", tmp_path / "twice.txt"), "lists class 'a' twice"),
        ((tmp_path / "imgs", "--labels", tmp_path / "none.txt"), "cannot be read"),
        ((tmp_path / "imgs", "--preprocess", "crop=0.5"), "crop goes with resize=center-crop"),
        ((tmp_path / "imgs", "--preprocess", "size=32"), "disagrees with the model's input"),
    ]
    for args, phrase in cases:
        r = classify(tmp_path, model, *args)
        assert r.returncode == 2 and phrase in r.stderr, (args, r.returncode, r.stderr)
    r = classify(tmp_path, tmp_path / "missing.onnx", tmp_path / "imgs")
    assert r.returncode == 2, r.stderr
