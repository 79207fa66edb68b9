#!/usr/bin/env python3
"""Checks the include rules and file sizes of src/ (docs/architecture.md, "Layering"); run by ctest (layering).

Usage: scripts/check-layering.py [SRC_DIR]   (default: the src/ next to this script)

Reads every `#include "..."` of every source under SRC_DIR and fails, naming file:line, where a module includes one
it must not (RULES), and where a source outside a kernels/ folder is longer than MAX_LINES.
Standard library only.
"""
import os
import re
import sys

# (module that includes, module it must not include, why). A module is a path prefix under src/, ending in "/".
RULES = [
    ("core/", "", "core/ is the bottom layer: it includes only core/"),
    ("ir/", "passes/ plan/ quant/ onnx/ runtime/ backends/ tasks/ eval/ frontend/",
     "the IR and the ops are below every module that uses them"),
    ("ops/", "passes/ plan/ quant/ onnx/ runtime/ backends/ tasks/ eval/ frontend/",
     "the ops (and their reference interpreter) are the oracle every backend is tested against"),
    ("backends/", "tasks/", "detection pre- and post-processing is a task on top of the runtime (src/tasks/cuda/)"),
    ("runtime/", "onnx/", "a plan loads and runs without the ONNX importer (protobuf): models enter in src/frontend/"),
    ("backends/", "onnx/", "a plan loads and runs without the ONNX importer (protobuf): models enter in src/frontend/"),
    ("runtime/", "backends/",
     "the runtime reaches the backends only through the backend table (runtime/backend.h, src/frontend/)"),
    ("quant/", "runtime/ backends/",
     "quantization decides on graphs; engines call it (runtime/int8_sources.h maps their options onto it)"),
    ("eval/", "runtime/ backends/", "metrics work on detections and files, not on engines"),
    ("tasks/", "backends/", "CPU task code builds without CUDA; GPU task code lives in src/tasks/cuda/"),
    ("backends/dla/", "runtime/ quant/ passes/ backends/cuda/",
     "the DLA rules answer from a prepared graph and the formats they are given (plan/target.h): no engine, "
     "quantizer or CUDA code"),
]
# Exceptions to a rule, as (including module, included module): the GPU task code builds on the CUDA backend; the
# public API's implementation (src/api/) is part of the top library with the front end.
RULE_EXCEPTIONS = [("tasks/cuda/", "backends/cuda/"), ("api/", "frontend/")]
# Nothing below the front end includes it (it is the top library, qdeploy_frontend).
TOP = "frontend/"

MAX_LINES = 1000
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def forbidden(src_rel, target):
    """The reason `src_rel` (a path under src/) must not include `target`, or None."""
    if any(src_rel.startswith(a) and target.startswith(b) for a, b in RULE_EXCEPTIONS):
        return None
    if target.startswith(TOP) and not src_rel.startswith(TOP):
        return "the front end is the top library: nothing under src/ includes it (only tools/ do)"
    for frm, to, why in RULES:
        if not src_rel.startswith(frm):
            continue
        if frm == "core/":
            if "/" in target and not target.startswith("core/"):
                return why
            continue
        if any(target.startswith(t) for t in to.split()):
            return why
    return None


def check(src_dir):
    errors = []
    for root, dirs, files in os.walk(src_dir):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(SOURCE_EXT):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src_dir).replace(os.sep, "/")
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            for i, line in enumerate(lines, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                why = forbidden(rel, m.group(1))
                if why:
                    errors.append(f"src/{rel}:{i}: includes \"{m.group(1)}\": {why}")
            in_kernels = "/kernels/" in "/" + rel
            if in_kernels:
                continue
            if len(lines) > MAX_LINES:
                errors.append(f"src/{rel}:{len(lines)}: {len(lines)} lines, past the {MAX_LINES}-line limit for "
                              "sources outside kernels/: split it by responsibility")
    return errors


def main():
    src_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                                 "src")
    if not os.path.isdir(src_dir):
        print(f"check-layering: {src_dir} is not a directory", file=sys.stderr)
        return 2
    errors = check(src_dir)
    for e in errors:
        print(e)
    if errors:
        print(f"check-layering: {len(errors)} violation(s); the rules are in docs/architecture.md (Layering)")
        return 1
    print("check-layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
