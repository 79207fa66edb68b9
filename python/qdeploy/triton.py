"""Serving a qdeploy plan with Triton Inference Server's Python backend.

``python3 -m qdeploy.triton PLAN --repository DIR --name NAME`` writes a model repository entry::

    DIR/NAME/config.pbtxt      inputs/outputs (names, types, dims) from the plan, max batch, dynamic batching,
                               one instance per GPU (or CPU instances for a CPU plan)
    DIR/NAME/1/model.plan      the plan
    DIR/NAME/1/model.py        qdeploy/triton_model.py: loads the plan on the instance's GPU, runs batched requests

docs/triton.md describes the server side, the C++ backend alternative and multi-GPU placement.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import List, Optional, Sequence

TRITON_TYPES = {
    "FLOAT32": "TYPE_FP32", "FLOAT16": "TYPE_FP16", "FLOAT64": "TYPE_FP64", "INT8": "TYPE_INT8",
    "UINT8": "TYPE_UINT8", "INT16": "TYPE_INT16", "UINT16": "TYPE_UINT16", "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64", "BOOL": "TYPE_BOOL",
}


def _memory_dims(info) -> List[int]:
    """The binding's dims as its memory holds them (NHWC bindings permuted), -1 where chosen at run time."""
    dims = [-1 if d is None else int(d) for d in info.shape]
    if str(info.layout).endswith("NHWC") and len(dims) == 4:
        dims = [dims[0], dims[2], dims[3], dims[1]]
    return dims


def max_batch_from_plan(engine) -> Optional[int]:
    """The largest batch the engine takes: its profile's max, the fixed batch of a static model (None: a dynamic
    batch with no profile, which takes any size)."""
    opt = engine.options()
    first = engine.inputs[0]
    if opt.max_shapes and first.name in opt.max_shapes:
        return int(opt.max_shapes[first.name][0])
    d = first.shape[0] if first.shape else None
    return None if d is None else int(d)


def config_pbtxt(engine, name: str, max_batch_size: Optional[int] = None, gpus: Sequence[int] = (0,),
                 instances_per_gpu: int = 1, preferred_batch_sizes: Sequence[int] = (),
                 max_queue_delay_us: int = 100, plan_file: str = "model.plan") -> str:
    """Triton's model configuration (protobuf text) for a qdeploy engine served by qdeploy/triton_model.py."""
    batch_dynamic = bool(engine.inputs) and all(i.shape and i.shape[0] is None for i in engine.inputs)
    plan_max = max_batch_from_plan(engine)
    if max_batch_size is None:
        max_batch_size = plan_max if plan_max is not None else 8
    if plan_max is not None and batch_dynamic and max_batch_size > plan_max:
        raise ValueError(f"max batch {max_batch_size} is beyond the plan's profile ({plan_max}): rebuild the plan "
                         "with a larger --max shape")
    batching = batch_dynamic and max_batch_size > 0
    lines = [f'name: "{name}"', 'backend: "python"', f"max_batch_size: {max_batch_size if batching else 0}"]

    def tensor(info, kind):
        dtype = str(info.dtype).split(".")[-1]
        if dtype not in TRITON_TYPES:
            raise ValueError(f"{kind} '{info.name}': no Triton type for {dtype}")
        dims = _memory_dims(info)
        if batching:
            dims = dims[1:]  # Triton adds the batch dim
        return (f'  {{\n    name: "{info.name}"\n    data_type: {TRITON_TYPES[dtype]}\n'
                f"    dims: [ {', '.join(str(d) for d in dims)} ]\n  }}")

    lines.append("input [\n" + ",\n".join(tensor(i, "input") for i in engine.inputs) + "\n]")
    lines.append("output [\n" + ",\n".join(tensor(o, "output") for o in engine.outputs) + "\n]")
    if batching:
        pref = [int(b) for b in preferred_batch_sizes if 0 < int(b) <= max_batch_size]
        body = [f"  preferred_batch_size: [ {', '.join(map(str, pref))} ]"] if pref else []
        body.append(f"  max_queue_delay_microseconds: {int(max_queue_delay_us)}")
        lines.append("dynamic_batching {\n" + "\n".join(body) + "\n}")
    if engine.device == engine.device.CUDA:
        gpu_list = ", ".join(str(int(g)) for g in gpus)
        lines.append(f"instance_group [\n  {{\n    kind: KIND_GPU\n    count: {int(instances_per_gpu)}\n"
                     f"    gpus: [ {gpu_list} ]\n  }}\n]")
    else:
        lines.append(f"instance_group [\n  {{\n    kind: KIND_CPU\n    count: {int(instances_per_gpu)}\n  }}\n]")
    lines.append(f'parameters {{\n  key: "plan"\n  value: {{ string_value: "{plan_file}" }}\n}}')
    return "\n".join(lines) + "\n"


def _write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_repository(plan: str, repository: str, name: str, version: int = 1, **config) -> str:
    """Writes repository/name/{config.pbtxt, VERSION/model.plan, VERSION/model.py}; returns the model folder."""
    import qdeploy

    engine = qdeploy.load(plan)
    model_dir = os.path.join(repository, name)
    version_dir = os.path.join(model_dir, str(version))
    os.makedirs(version_dir, exist_ok=True)
    shutil.copyfile(plan, os.path.join(version_dir, "model.plan"))
    shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)), "triton_model.py"),
                    os.path.join(version_dir, "model.py"))
    _write_atomic(os.path.join(model_dir, "config.pbtxt"), config_pbtxt(engine, name, **config))
    return model_dir


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m qdeploy.triton", description=__doc__.split("\n\n")[0])
    p.add_argument("plan", help="a plan written by `qdeploy build` or Engine.save")
    p.add_argument("--repository", required=True, help="the model repository folder")
    p.add_argument("--name", required=True, help="the model's name in the repository")
    p.add_argument("--version", type=int, default=1)
    p.add_argument("--max-batch-size", type=int, default=None,
                   help="Triton's max_batch_size (default: the plan's profile max; 8 for an unbounded batch)")
    p.add_argument("--gpus", default="0", help="comma-separated GPU ids for the instance group (GPU plans)")
    p.add_argument("--instances-per-gpu", type=int, default=1)
    p.add_argument("--preferred-batch-sizes", default="", help="comma-separated, for the dynamic batcher")
    p.add_argument("--max-queue-delay-us", type=int, default=100)
    p.add_argument("--print", action="store_true", help="print config.pbtxt")
    a = p.parse_args(argv)
    try:
        folder = write_repository(
            a.plan, a.repository, a.name, a.version, max_batch_size=a.max_batch_size,
            gpus=[int(g) for g in a.gpus.split(",") if g], instances_per_gpu=a.instances_per_gpu,
            preferred_batch_sizes=[int(b) for b in a.preferred_batch_sizes.split(",") if b],
            max_queue_delay_us=a.max_queue_delay_us)
    except (ValueError, OSError) as e:  # qdeploy.Error's subclasses are ValueError/OSError where the input is bad
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.print:
        with open(os.path.join(folder, "config.pbtxt")) as f:
            sys.stdout.write(f.read())
    print(f"wrote {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
