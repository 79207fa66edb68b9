"""Training in slices: exact resume, the time limit, resume file sizes, the shared image cache, and export of the
checkpoints such a run leaves."""

import json
import pickle
import shutil

import pytest
import torch

from qdeploy import data, export, train
from qdeploy.checkpoint import read_state_dict


def run(synth, out, *extra, epochs=2):
    return train.main(["--model", "yolov5n", "--data", str(synth), "--epochs", str(epochs), "--batch", "2",
                       "--imgsz", "64", "--workers", "0", "--log-interval", "1", "--out", str(out), *extra])


def assert_close_dicts(a, b, what):
    """Equal keys and values to float tolerance (bit-exact in practice on CPU); one cheap check per tensor."""
    assert a.keys() == b.keys(), what
    bad = [k for k in a if not (torch.equal(a[k], b[k]) or (a[k].is_floating_point() and a[k].shape == b[k].shape
                                                          and torch.allclose(a[k], b[k], rtol=1e-6, atol=1e-7)))]
    assert not bad, f"{what}: {bad[:5]} differ"


def assert_same_run(a, b):
    """Resume state of two runs: equal counters, schedule position and weights."""
    for name in ("model.pt", "ema.pt", "last.pt", "best.pt"):
        assert_close_dicts(read_state_dict(a / name), read_state_dict(b / name), name)
    assert train.load_trusted(a / "ema.pt")["updates"] == train.load_trusted(b / "ema.pt")["updates"] > 0
    oa, ob = train.load_trusted(a / "optimizer.pt")["optimizer"], train.load_trusted(b / "optimizer.pt")["optimizer"]
    assert [g["lr"] for g in oa["param_groups"]] == [g["lr"] for g in ob["param_groups"]]
    assert len(oa["state"]) > 0
    assert_close_dicts({k: v["momentum_buffer"] for k, v in oa["state"].items()},
                       {k: v["momentum_buffer"] for k, v in ob["state"].items()}, "momentum buffers")
    sa, sb = train.load_trusted(a / "state.pt"), train.load_trusted(b / "state.pt")
    assert (sa["epoch"], sa["batch"], sa["it"]) == (sb["epoch"], sb["batch"], sb["it"])
    assert sa["best"] == pytest.approx(sb["best"], rel=1e-6)


class FakeClock:
    """Advances one second per reading: the time limit's decisions then do not depend on this machine's speed."""

    def __init__(self):
        self.now = 0

    def __call__(self):
        self.now += 1
        return float(self.now)


@pytest.fixture(autouse=True)
def every_batch_steps(monkeypatch):
    """A lower nominal batch, so that every batch of 2 is an optimizer step (and a possible stop point)."""
    monkeypatch.setattr(train, "NOMINAL_BATCH", 2)


@pytest.fixture(scope="module")
def synth_module(tmp_path_factory):
    import synth

    pytest.importorskip("PIL")
    return synth.write_dataset(tmp_path_factory.mktemp("data"), n_images=8, size=128)


@pytest.fixture(scope="module")
def straight(synth_module, tmp_path_factory):
    """A 2-epoch run without interruption, on a fake clock: (its output folder, the clock readings it took)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train, "NOMINAL_BATCH", 2)
        mp.setattr(train, "clock", FakeClock())
        out = tmp_path_factory.mktemp("straight")
        assert run(synth_module, out)["finished"]
        return out, train.clock.now


def test_stop_after_an_epoch_and_resume_equals_straight_run(synth_module, straight, tmp_path):
    synth_data, (straight, _) = synth_module, straight
    first = tmp_path / "first"
    result = run(synth_data, first, "--stop-at-epoch", "1")
    assert not result["finished"] and (result["epoch"], result["batch"]) == (1, 0)
    st = train.load_trusted(first / "state.pt")
    assert (st["epoch"], st["batch"], st["it"]) == (1, 0, 3) and st["run"]["epochs"] == 2
    # The second slice writes to another folder (as on a fresh machine) and takes the run's arguments from the state.
    second = tmp_path / "second"
    assert train.main(["--data", str(synth_data), "--workers", "0", "--resume", str(first), "--out", str(second)])[
        "finished"]
    assert_same_run(straight, second)
    log = (second / "train.log").read_text()
    assert "stopped at epoch 2/2, batch 0/3" in log and "resumed from" in log and "epoch 2/2 done" in log

    # Each weight file of yolov5n (1.9M parameters in fp32) stays far below the 15 MB limit of a transfer.
    for name in ("model.pt", "ema.pt", "optimizer.pt", "last.pt", "best.pt"):
        size = (second / name).stat().st_size
        assert 5e6 < size < 15e6, (name, size)
    assert (second / "state.pt").stat().st_size < 1e6
    assert not list(second.glob("*.tmp"))

    # Resuming checks the arguments, the data and that the files come from one save.
    with pytest.raises(ValueError, match="--epochs 3 vs 2"):
        run(synth_data, tmp_path / "x", "--resume", str(first), epochs=3)
    other = tmp_path / "other"
    shutil.copytree(synth_data, other)
    ann = json.loads((other / "instances.json").read_text())
    ann["annotations"][0]["bbox"][0] += 1
    (other / "instances.json").write_text(json.dumps(ann))
    with pytest.raises(ValueError, match="data .* differ"):
        run(other, tmp_path / "y", "--resume", str(first))
    longer = tmp_path / "longer"  # unless the schedule is changed on purpose
    run(synth_data, longer, "--resume", str(first), "--reschedule", "--stop-at-epoch", "2", epochs=3)
    st = train.load_trusted(longer / "state.pt")
    assert st["run"]["epochs"] == 3 and (st["epoch"], st["it"]) == (2, 6)
    assert "the run now has 3 epochs instead of 2" in (longer / "train.log").read_text()
    shutil.copy(second / "model.pt", first / "model.pt")  # from a later save, with another tag
    with pytest.raises(RuntimeError, match="different saves"):
        train.read_resume_state(first)

    # The checkpoints export: whole detector and head-only.
    for extra in ([], ["--head-only"]):
        onnx_path = tmp_path / f"m{len(extra)}.onnx"
        export.main(["--model", "yolov5n", "--nc", "10", "--weights", str(second / "best.pt"), "--imgsz", "64",
                     "--out", str(onnx_path), *extra])
        assert onnx_path.stat().st_size > 1e6


def test_time_limit_stops_inside_an_epoch_and_resumes_exactly(synth_module, straight, tmp_path, monkeypatch):
    synth_data, (straight, full) = synth_module, straight  # the uninterrupted run took ``full`` fake seconds
    monkeypatch.setattr(train, "clock", FakeClock())
    monkeypatch.setattr(train, "STOP_MARGIN_S", 0.0)
    sliced = tmp_path / "sliced"
    result = run(synth_data, sliced, "--time-limit", str(full * 0.45 / 60))
    assert not result["finished"]
    st = train.load_trusted(sliced / "state.pt")
    assert 0 < st["it"] < 6 and 0 < st["batch"] < 3, "expected a stop inside an epoch"
    assert train.clock.now <= full * 0.45  # done before the limit
    # Resume in place, with the image cache this time: the cache must not change what the model sees.
    monkeypatch.setattr(train, "clock", train.time.monotonic)
    assert run(synth_data, sliced, "--resume", str(sliced), "--cache-images", "ram")["finished"]
    assert_same_run(straight, sliced)


def test_image_cache_gives_the_decoded_images(synth_data, tmp_path):
    train_set, val_set = data.detection_splits(synth_data, imgsz=64, mosaic=1.0)
    before = [train_set[i] for i in range(len(train_set))]
    cache = data.cache_images(train_set, workers=2, tag="t")  # an anonymous memory file, filled by two workers
    try:
        assert cache.fd is not None and cache.nbytes == len(train_set) * 3 * 128 * 128
        copy = pickle.loads(pickle.dumps(cache))  # what a spawned worker gets: the path, not the pixels
        assert len(pickle.dumps(cache)) < 10_000 and torch.equal(copy[3], cache[3])
        assert torch.equal(cache[0], data.read_image(train_set.image_path(0)))
        for (a, la, ia), (b, lb, ib) in zip(before, (train_set[i] for i in range(len(train_set)))):
            assert torch.equal(a, b) and torch.equal(la, lb) and ia == ib
        loader = torch.utils.data.DataLoader(train_set, batch_size=4, num_workers=2, collate_fn=data.collate)
        imgs, _, ids = next(iter(loader))
        assert torch.equal(imgs, torch.stack([x[0] for x in before[:4]])) and ids == [x[2] for x in before[:4]]
    finally:
        cache.close()
    assert cache.fd is None
    named = data.cache_images(val_set, tmp_path, tag="v")  # a named file where a folder is given
    assert named.path.startswith(str(tmp_path)) and torch.equal(val_set[0][0], data.CocoDetection(
        val_set.images_dir, data.find_split(synth_data, "train")[1], 64, image_ids=[val_set.images[0]["id"]])[0][0])
    named.close()
    assert not list(tmp_path.glob("qdeploy-cache-*"))


def test_split_with_annotations_folder(tmp_path):
    """``qdeploy dataset fmnist-det`` writes DIR/{train,val}/{images/, annotations/instances_<split>.json}."""
    import synth

    pytest.importorskip("PIL")
    for split in ("train", "val"):
        d = synth.write_dataset(tmp_path / split, n_images=2, size=64)
        (d / "annotations").mkdir()
        (d / "instances.json").rename(d / "annotations" / f"instances_{split}.json")
    assert data.find_split(tmp_path, "val") == (tmp_path / "val" / "images",
                                                tmp_path / "val" / "annotations" / "instances_val.json")
    train_set, val_set = data.detection_splits(tmp_path, imgsz=64)
    assert len(train_set) == 2 and len(val_set) == 2


def test_rng_state_round_trip():
    import random

    import numpy as np

    state = train.rng_state()
    first = (np.random.rand(), random.random(), torch.rand(1).item())
    train.set_rng_state(state)
    assert (np.random.rand(), random.random(), torch.rand(1).item()) == first
