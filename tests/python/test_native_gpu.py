"""qdeploy._native on a GPU with torch tensors: zero-copy bindings (DLPack and __cuda_array_interface__ both ways),
dtype checks against fp16 bindings, a run chained to torch's streams and events with no host wait, plans on a chosen
device, and the detector. Skips without a CUDA build of the module, torch with CUDA, or a GPU (CI has none);
docs/gpu-machine.md says how it runs on the GPU machine."""

from pathlib import Path

import numpy as np
import pytest

native = pytest.importorskip("qdeploy._native", reason="qdeploy._native not built")
torch = pytest.importorskip("torch")
import qdeploy  # noqa: E402

if not (qdeploy.has_cuda() and torch.cuda.is_available()):
    pytest.skip("needs a CUDA build of qdeploy._native and a GPU", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
MODEL_BN = str(ROOT / "models" / "model_bn.onnx")
DETECTOR = str(ROOT / "models" / "yolov5n_fmnist_det.onnx")
SHAPE = [16, 3, 32, 32]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """ModelBN with a dynamic batch (the shipped export has batch 1)."""
    import synth

    return synth.dynamic_batch_copy(MODEL_BN, tmp_path_factory.mktemp("bn") / "model_bn_dynamic.onnx")


@pytest.fixture(scope="module")
def engines(model):
    cpu = qdeploy.build(model, device="cpu", shapes={"input": SHAPE})
    gpu = qdeploy.build(model, device="cuda", precision="fp32", shapes={"input": SHAPE})
    return cpu, gpu


def reference(cpu, x):
    return torch.from_numpy(cpu.run({"input": x.cpu().numpy()})["output"])


def test_torch_tensors_bound_without_copies(engines):
    cpu, gpu = engines
    ctx = gpu.create_context()
    ctx.set_input_shapes({"input": SHAPE})
    x = torch.rand(*SHAPE, device="cuda")
    y = torch.full((SHAPE[0], 10), float("nan"), device="cuda")
    ctx.bind("input", x)
    ctx.bind("output", y)
    stream = torch.cuda.current_stream()
    ctx.enqueue(stream)
    stream.synchronize()
    torch.testing.assert_close(y.cpu(), reference(cpu, x), rtol=1e-3, atol=1e-3)
    # The input changes in place: the next run sees it (the binding is the tensor's memory).
    x.mul_(0.5)
    ctx.enqueue(stream)
    stream.synchronize()
    torch.testing.assert_close(y.cpu(), reference(cpu, x), rtol=1e-3, atol=1e-3)


def test_context_buffers_as_torch_tensors(engines):
    cpu, gpu = engines
    ctx = gpu.create_context()
    x = torch.rand(*SHAPE).numpy()
    out = ctx.run({"input": x})["output"]
    view = ctx.device_tensor("output")
    t = torch.from_dlpack(view)
    assert t.device.type == "cuda" and tuple(t.shape) == (SHAPE[0], 10)
    assert t.data_ptr() == ctx.device_buffer("output")  # the context's own memory
    torch.testing.assert_close(t.cpu(), torch.from_numpy(out))
    t2 = torch.as_tensor(ctx.device_tensor("output"), device="cuda")  # __cuda_array_interface__
    assert t2.data_ptr() == t.data_ptr()
    del ctx  # the views keep the context alive
    torch.testing.assert_close(t.cpu(), torch.from_numpy(out))


def test_fp16_binding_checks_dtype(model):
    gpu = qdeploy.build(model, device="cuda", precision="fp16", shapes={"input": SHAPE}, input_formats=["fp16"])
    assert gpu.inputs[0].dtype == qdeploy.DataType.FLOAT16
    ctx = gpu.create_context()
    ctx.set_input_shapes({"input": SHAPE})
    with pytest.raises(qdeploy.InvalidArgumentError, match="float16 in this engine"):
        ctx.bind("input", torch.rand(*SHAPE, device="cuda"))
    with pytest.raises(qdeploy.InvalidArgumentError, match="not contiguous"):
        ctx.bind("input", torch.rand(SHAPE[0], 32, 32, 3, device="cuda").half().permute(0, 3, 1, 2))
    x = torch.rand(*SHAPE, device="cuda").half()
    ctx.bind("input", x)
    ctx.enqueue(torch.cuda.current_stream())
    out = torch.from_dlpack(ctx.device_tensor("output"))
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()


def test_enqueue_waits_for_torch_events(engines):
    cpu, gpu = engines
    ctx = gpu.create_context()
    ctx.set_input_shapes({"input": SHAPE})
    src = torch.rand(*SHAPE, device="cuda")
    x = torch.zeros(*SHAPE, device="cuda")
    y = torch.zeros(SHAPE[0], 10, device="cuda")
    torch.cuda.synchronize()
    ctx.bind("input", x)
    ctx.bind("output", y)
    producer, consumer = torch.cuda.Stream(), torch.cuda.Stream()
    ready, done = torch.cuda.Event(), torch.cuda.Event()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(200_000_000)  # a long kernel first: without the wait the run would read zeros
        x.copy_(src)
        ready.record(producer)
    ctx.enqueue(consumer, wait_events=[ready], signal_events=[done])
    done.synchronize()
    torch.testing.assert_close(y.cpu(), reference(cpu, src), rtol=1e-3, atol=1e-3)


def test_plan_on_a_chosen_device(engines, tmp_path):
    _, gpu = engines
    plan = str(tmp_path / "bn.plan")
    gpu.save(plan)
    same = qdeploy.load(plan, device_index=torch.cuda.current_device())
    x = torch.rand(*SHAPE).numpy()
    np.testing.assert_allclose(same.run({"input": x})["output"], gpu.run({"input": x})["output"], rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(qdeploy.Error):
        qdeploy.load(plan, device_index=torch.cuda.device_count() + 7)


def test_detector_on_the_gpu_matches_the_cpu():
    image = qdeploy.read_image(str(ROOT / "models" / "samples" / "000001.jpg"))
    boxes = {}
    for device in ("cpu", "cuda"):
        det = qdeploy.Detector(qdeploy.build(DETECTOR, device=device, precision="fp32"))
        boxes[device] = det.detect([image])[0]
    assert len(boxes["cuda"]) == len(boxes["cpu"]) > 0
    np.testing.assert_allclose(boxes["cuda"][:, :4], boxes["cpu"][:, :4], atol=1.0)
    np.testing.assert_array_equal(boxes["cuda"][:, 5], boxes["cpu"][:, 5])
