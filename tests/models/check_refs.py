#!/usr/bin/env python3
"""Sanity checks for the ONNX Runtime reference outputs written by scripts/models/reference-outputs.sh.

Usage: python3 tests/models/check_refs.py [REFS_DIR]
  REFS_DIR defaults to ${QD_CACHE:-~/.cache/qdeploy}/models/refs

Needs only numpy. Checks, for every case folder that has a meta.json:
  * every .npy is format 1.0, '<f4', C order, header padded to 64 bytes, and loads with numpy;
  * shapes and min/max agree with meta.json; no NaN/Inf;
  * detection outputs (sigmoid_*) are probabilities in [0, 1]; on the synthetic page both text and background are
    present; the pre-sigmoid logits (an intermediate fetched as an extra output) agree with them;
  * classification outputs (softmax_*) have rows that sum to 1;
  * the input is consistent with the recorded preprocessing (de-normalizes to 8-bit pixel values).
Exits non-zero on the first failing case (after printing all problems of that case).
"""
import json
import os
import sys

import numpy as np


def read_npy_strict(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:6] == b"\x93NUMPY", f"{path}: bad magic"
    assert raw[6:8] == b"\x01\x00", f"{path}: not format 1.0"
    hlen = int.from_bytes(raw[8:10], "little")
    assert (10 + hlen) % 64 == 0, f"{path}: header not padded to 64 bytes"
    header = raw[10:10 + hlen].decode("latin1")
    assert header.endswith("\n"), f"{path}: header does not end with newline"
    d = eval(header, {"__builtins__": {}}, {"False": False, "True": True})  # noqa: S307 - a literal dict
    assert d["descr"] == "<f4" and d["fortran_order"] is False, f"{path}: {d}"
    a = np.load(path, allow_pickle=False)
    assert a.dtype == np.dtype("<f4") and a.flags.c_contiguous and tuple(a.shape) == tuple(d["shape"])
    assert len(raw) == 10 + hlen + 4 * a.size, f"{path}: trailing bytes"
    return a


def check_case(case_dir):
    problems = []

    def expect(cond, msg):
        if not cond:
            problems.append(msg)

    meta = json.load(open(os.path.join(case_dir, "meta.json")))
    name = meta["case"]
    gen = meta["inputs"][0]["generator"]["kind"]
    for inp in meta["inputs"]:
        x = read_npy_strict(os.path.join(case_dir, inp["file"]))
        expect(list(x.shape) == inp["shape"], f"input shape {x.shape} != meta {inp['shape']}")
        expect(np.isfinite(x).all(), "input has NaN/Inf")
        pre = inp["preprocessing"]
        if pre is None:  # raw uniform noise
            expect(x.min() >= -1 and x.max() <= 1, f"uniform input outside [-1, 1]: {x.min()}..{x.max()}")
            expect(np.isclose(x.min(), inp["min"]) and np.isclose(x.max(), inp["max"]), "input min/max != meta")
            continue
        mean = np.array(pre["mean"], np.float64)[None, :, None, None]
        std = np.array(pre["std"], np.float64)[None, :, None, None]
        pix = (x.astype(np.float64) * std + mean) * 255.0
        err = np.abs(pix - np.round(pix)).max()
        expect(err < 1e-3 and pix.min() > -0.5 and pix.max() < 255.5,
               f"input does not de-normalize to 8-bit pixels (max frac err {err}, range {pix.min()}..{pix.max()})")
        expect(np.isclose(x.min(), inp["min"]) and np.isclose(x.max(), inp["max"]), "input min/max != meta")

    arrays = {}
    for out in meta["outputs"]:
        y = arrays[out["name"]] = read_npy_strict(os.path.join(case_dir, out["file"]))
        o = out["name"]
        expect(list(y.shape) == out["shape"], f"{o}: shape {y.shape} != meta {out['shape']}")
        expect(np.isfinite(y).all(), f"{o}: NaN/Inf")
        expect(float(y.min()) == out["min"] and float(y.max()) == out["max"], f"{o}: min/max != meta")
        n = meta["inputs"][0]["shape"][0]
        if o.startswith("sigmoid"):  # DB probability map, N x 1 x H x W, same H, W as the input
            h, w = meta["inputs"][0]["shape"][2:]
            expect(list(y.shape) == [n, 1, h, w], f"{o}: shape {y.shape}, expected {[n, 1, h, w]}")
            expect(y.min() >= 0.0 and y.max() <= 1.0, f"{o}: outside [0,1]: {y.min()}..{y.max()}")
            frac = float((y > 0.3).mean())  # PaddleOCR's default binarization threshold
            if gen == "document":
                expect(0.005 < frac < 0.5, f"{o}: text fraction {frac} is implausible for the synthetic page")
            info = f"{o}{list(y.shape)} in [{y.min():.3g}, {y.max():.3g}], {100 * frac:.1f}% > 0.3"
        elif o.startswith("softmax"):  # N x 2 (0 and 180 degrees)
            expect(list(y.shape) == [n, 2], f"{o}: shape {y.shape}, expected {[n, 2]}")
            s = y.astype(np.float64).sum(axis=1)
            expect(np.abs(s - 1).max() < 1e-5, f"{o}: rows sum to {s}")
            expect(y.min() >= 0 and y.max() <= 1, f"{o}: outside [0,1]")
            info = f"{o}{list(y.shape)} rows {np.round(y, 4).tolist()}, |sum-1| <= {np.abs(s - 1).max():.1e}"
        elif out.get("intermediate"):
            info = f"{o}{list(y.shape)} (intermediate) in [{y.min():.4g}, {y.max():.4g}]"
        else:
            info = f"{o}{list(y.shape)} (no specific check)"
        print(f"  {name}: {info}")

    # the detector's logits (intermediate, the Sigmoid's input) must reproduce the probability map
    logits = [o["name"] for o in meta["outputs"] if o.get("intermediate")]
    probs = [o["name"] for o in meta["outputs"] if o["name"].startswith("sigmoid")]
    if logits and probs:
        l, p = arrays[logits[0]].astype(np.float64), arrays[probs[0]].astype(np.float64)
        expect(l.shape == p.shape, f"logits shape {l.shape} != probabilities {p.shape}")
        if l.shape == p.shape:
            err = np.abs(1.0 / (1.0 + np.exp(-l)) - p).max()
            expect(err < 1e-6, f"sigmoid(logits) differs from the probabilities by {err}")
            sat = float(((p == 0) | (p == 1)).mean())
            print(f"  {name}: sigmoid(logits) matches (max err {err:.1e}); {100 * sat:.1f}% of the map is exactly 0 or 1")

    for p in problems:
        print(f"  FAIL {name}: {p}")
    return not problems


def main():
    default = os.path.join(os.environ.get("QD_CACHE", os.path.expanduser("~/.cache/qdeploy")), "models", "refs")
    refs = sys.argv[1] if len(sys.argv) > 1 else default
    cases = sorted(d for d in os.listdir(refs) if os.path.isfile(os.path.join(refs, d, "meta.json"))) \
        if os.path.isdir(refs) else []
    if not cases:
        print(f"check_refs: no cases under {refs} (run scripts/models/reference-outputs.sh)", file=sys.stderr)
        return 2
    ok = all([check_case(os.path.join(refs, c)) for c in cases])
    print(f"check_refs: {len(cases)} cases, {'all OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
