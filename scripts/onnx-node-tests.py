#!/usr/bin/env python3
"""Writes the ONNX backend node tests of the installed onnx package (model.onnx + test_data_set_N/{input,output}_N.pb,
the layout of onnx/backend/test/data/node) into OUT, for qdeploy_conformance. Wheels do not ship the data; the test
cases themselves (onnx.backend.test.case.node) do, and compute their expected outputs with numpy.

    python3 scripts/onnx-node-tests.py OUT [--min-opset 18]

--min-opset keeps only tests whose model imports the default domain at that opset or later (the opsets Debian's
libonnx-testdata, onnx 1.12, does not cover). Tests with sequence, map or optional inputs are skipped.
"""

import argparse
import os
import sys

import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node


def tensor_pb(value, name):
    return value if isinstance(value, onnx.TensorProto) else numpy_helper.from_array(value, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--min-opset", type=int, default=0)
    args = ap.parse_args()
    written = skipped = 0
    for case in node.collect_testcases():
        model = case.model
        opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
        if opset < args.min_opset:
            continue
        if any(not vi.type.HasField("tensor_type") for vi in list(model.graph.input) + list(model.graph.output)):
            skipped += 1
            continue
        d = os.path.join(args.out, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            s = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(s, exist_ok=True)
            for kind, values, infos in (("input", inputs, model.graph.input), ("output", outputs, model.graph.output)):
                for j, v in enumerate(values):
                    with open(os.path.join(s, f"{kind}_{j}.pb"), "wb") as f:
                        f.write(tensor_pb(v, infos[j].name).SerializeToString())
        written += 1
    print(f"onnx {onnx.__version__}: wrote {written} node tests to {args.out} ({skipped} with non-tensor I/O skipped)")


if __name__ == "__main__":
    sys.exit(main())
