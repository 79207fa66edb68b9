#!/usr/bin/env python3
"""The layering checker (scripts/check-layering.py) on fixture trees: it must name every violation by file:line and
fail, pass a clean tree, and fail on a size exception that is no longer needed.

Usage: check_layering_test.py PATH/TO/check-layering.py
"""
import os
import subprocess
import sys
import tempfile


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def lines(n):
    return "".join(f"int v{i} = {i};\n" for i in range(n))


def run(checker, src):
    p = subprocess.run([sys.executable, checker, src], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def clean_tree(root):
    write(root, "core/status.h", '#pragma once\n#include <string>\n#include "core/dtype.h"\n')
    write(root, "tasks/cuda/pipeline.cpp", '#include "backends/cuda/device.h"\n#include "tasks/detection.h"\n')
    write(root, "backends/cuda/engine.cpp", '#include "runtime/engine.h"\n#include "quant/int8.h"\n')
    write(root, "backends/cuda/kernels/big.cu", lines(2000))  # kernels/ may be long
    write(root, "frontend/frontend.cpp", '#include "onnx/importer.h"\n#include "backends/cuda/engine.h"\n')
    write(root, "passes/ok.cpp", lines(1000))
    write(root, "backends/dla/rules.cpp", '#include "plan/target.h"\n#include "ir/graph.h"\n')


def main():
    checker = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        clean_tree(src)
        rc, out = run(checker, src)
        if rc != 0:
            failures.append(f"a clean tree failed (rc {rc}):\n{out}")

        bad = {
            "backends/cuda/post.h": ('#pragma once\n\n#include "tasks/detection.h"\n', "src/backends/cuda/post.h:3:"),
            "runtime/load.cpp": ('#include "runtime/engine.h"\n#include "onnx/importer.h"\n', "src/runtime/load.cpp:2:"),
            "backends/cuda/import.cpp": ('#include "onnx/importer.h"\n', "src/backends/cuda/import.cpp:1:"),
            "ops/conv.cpp": ('#include "ops/op.h"\n#include "backends/cuda/device.h"\n', "src/ops/conv.cpp:2:"),
            "eval/map.cpp": ('#include "runtime/engine.h"\n', "src/eval/map.cpp:1:"),
            "quant/options.h": ('// x\n#include "runtime/engine.h"\n', "src/quant/options.h:2:"),
            "quant/calib.cpp": ('#  include "backends/cpu/reference.h"\n', "src/quant/calib.cpp:1:"),
            "runtime/table.cpp": ('#include "frontend/frontend.h"\n', "src/runtime/table.cpp:1:"),
            "tasks/nms.cpp": ('#include "backends/cuda/device.h"\n', "src/tasks/nms.cpp:1:"),
            "backends/dla/place.cpp": ('#include "quant/int8.h"\n', "src/backends/dla/place.cpp:1:"),
            "core/tensor.h": ('#include "ir/graph.h"\n', "src/core/tensor.h:1:"),
            "passes/huge.cpp": (lines(1001), "src/passes/huge.cpp:1001:"),
        }
        for rel, (text, _) in bad.items():
            write(src, rel, text)
        rc, out = run(checker, src)
        if rc != 1:
            failures.append(f"a tree with violations gave rc {rc}, not 1:\n{out}")
        for rel, (_, expect) in bad.items():
            if expect not in out:
                failures.append(f"no report '{expect}' for {rel}:\n{out}")
        reported = [l for l in out.splitlines() if l.startswith("src/")]
        if len(reported) != len(bad):
            failures.append(f"{len(reported)} reports for {len(bad)} violations:\n{out}")

    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("check_layering_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
