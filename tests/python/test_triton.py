"""The Triton Python-backend model (qdeploy/triton_model.py) and the repository generator (qdeploy.triton), with a
stand-in for triton_python_backend_utils (Triton itself is not installable here): the config says what the plan
says, and dynamically batched requests get the outputs a direct run gives."""

import importlib.util
import json
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("qdeploy._native", reason="qdeploy._native not built (CMake found no pybind11)")
import qdeploy  # noqa: E402
from qdeploy import triton  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL_BN = str(ROOT / "models" / "model_bn.onnx")


def stand_in_pb_utils():
    """The parts of triton_python_backend_utils a Python-backend model uses."""
    m = types.ModuleType("triton_python_backend_utils")

    class Tensor:
        def __init__(self, name, array):
            self._name, self._array = name, np.asarray(array)

        def name(self):
            return self._name

        def as_numpy(self):
            return self._array

    class TritonError:
        def __init__(self, message):
            self._message = message

        def message(self):
            return self._message

    class InferenceResponse:
        def __init__(self, output_tensors, error=None):
            self.output_tensors, self.error = output_tensors, error

        def has_error(self):
            return self.error is not None

    class InferenceRequest:
        def __init__(self, inputs):
            self.inputs = inputs

    def get_input_tensor_by_name(request, name):
        return next((t for t in request.inputs if t.name() == name), None)

    m.Tensor, m.TritonError, m.InferenceResponse, m.InferenceRequest = Tensor, TritonError, InferenceResponse, \
        InferenceRequest
    m.get_input_tensor_by_name = get_input_tensor_by_name
    return m


@pytest.fixture
def repository(tmp_path):
    import synth

    model = synth.dynamic_batch_copy(MODEL_BN, tmp_path / "model_bn_dynamic.onnx")
    engine = qdeploy.build(model, max_shapes={"input": [16, 3, 32, 32]}, min_shapes={"input": [1, 3, 32, 32]},
                           opt_shapes={"input": [8, 3, 32, 32]})
    plan = str(tmp_path / "bn.plan")
    engine.save(plan)
    repo = tmp_path / "repo"
    assert triton.main([plan, "--repository", str(repo), "--name", "bn", "--preferred-batch-sizes", "4,8"]) == 0
    return engine, repo / "bn"


def test_config_describes_the_plan(repository):
    engine, folder = repository
    text = (folder / "config.pbtxt").read_text()
    assert 'name: "bn"' in text and 'backend: "python"' in text
    assert "max_batch_size: 16" in text  # the plan's profile max
    assert re.search(r'name: "input"\s+data_type: TYPE_FP32\s+dims: \[ 3, 32, 32 \]', text)
    assert re.search(r'name: "output"\s+data_type: TYPE_FP32\s+dims: \[ 10 \]', text)
    assert "preferred_batch_size: [ 4, 8 ]" in text and "max_queue_delay_microseconds: 100" in text
    assert "kind: KIND_CPU" in text  # a CPU plan
    assert (folder / "1" / "model.plan").is_file() and (folder / "1" / "model.py").is_file()
    with pytest.raises(ValueError, match="beyond the plan's profile"):
        triton.config_pbtxt(engine, "bn", max_batch_size=32)


def test_gpu_instance_group(repository):
    engine, _ = repository

    class CudaLike:  # the config's GPU branch, for an engine description on a machine with no GPU
        inputs, outputs = engine.inputs, engine.outputs
        device = engine.device.CUDA

        def options(self):
            return engine.options()

    text = triton.config_pbtxt(CudaLike(), "bn", gpus=[0, 1, 2, 3], instances_per_gpu=2)
    assert re.search(r"kind: KIND_GPU\s+count: 2\s+gpus: \[ 0, 1, 2, 3 \]", text)


def load_model(folder, monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", stand_in_pb_utils())
    spec = importlib.util.spec_from_file_location("bn_model", folder / "1" / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.TritonPythonModel()
    config = {"name": "bn", "max_batch_size": 16, "parameters": {"plan": {"string_value": "model.plan"}}}
    model.initialize({"model_config": json.dumps(config), "model_repository": str(folder), "model_version": "1",
                      "model_instance_kind": "CPU", "model_instance_device_id": "0"})
    return model, sys.modules["triton_python_backend_utils"]


def test_dynamic_batch_matches_direct_runs(repository, monkeypatch):
    engine, folder = repository
    model, pb = load_model(folder, monkeypatch)
    rng = np.random.default_rng(0)
    xs = [rng.random((n, 3, 32, 32), dtype=np.float32) for n in (1, 2, 3)]
    responses = model.execute([pb.InferenceRequest([pb.Tensor("input", x)]) for x in xs])
    assert len(responses) == 3
    for x, r in zip(xs, responses):
        assert not r.has_error()
        (out,) = r.output_tensors
        assert out.name() == "output" and out.as_numpy().shape == (len(x), 10)
        np.testing.assert_allclose(out.as_numpy(), engine.run({"input": x})["output"], rtol=1e-5, atol=1e-5)
    model.finalize()


def test_bad_requests_get_error_responses(repository, monkeypatch):
    _, folder = repository
    model, pb = load_model(folder, monkeypatch)
    good = np.zeros((2, 3, 32, 32), np.float32)
    responses = model.execute([
        pb.InferenceRequest([pb.Tensor("images", good)]),            # wrong input name
        pb.InferenceRequest([pb.Tensor("input", good)]),
        pb.InferenceRequest([pb.Tensor("input", np.zeros((1, 3, 16, 16), np.float32))]),  # wrong size
    ])
    assert responses[0].has_error() and "input" in responses[0].error.message()
    assert not responses[1].has_error() and responses[1].output_tensors[0].as_numpy().shape == (2, 10)
    assert responses[2].has_error()
