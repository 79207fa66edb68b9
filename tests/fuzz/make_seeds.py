#!/usr/bin/python3
"""Writes the fuzz seed corpus: small valid ONNX models (tests/fuzz/corpus/onnx), .npy files (corpus/npy) and .npz
archives (corpus/npz; `make_seeds.py --npz` writes only those).

Run with Debian's python (it has onnx 1.12 and numpy):  /usr/bin/python3 tests/fuzz/make_seeds.py
The models are built here rather than exported from a framework, so that they stay tiny (a fuzzer mutates small inputs
faster) and cover what qdeploy's importer and passes see in real CNN exports: Conv/BN/activation chains, residual adds,
pooling, the Shape->Gather->Concat->Reshape pattern of PyTorch's view(), Constant nodes, Q/DQ pairs, external-data
style initializers (raw_data), symbolic batch dims. A few ONNX backend node test models are copied in as well.
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ONNX_DIR = os.path.join(HERE, "corpus", "onnx")
NPY_DIR = os.path.join(HERE, "corpus", "npy")
NPZ_DIR = os.path.join(HERE, "corpus", "npz")
NODE_TESTS = "/usr/share/libonnx-testdata/data/node"
# Small node tests of ops qdeploy supports (each model.onnx is a few hundred bytes).
NODE_TEST_SEEDS = [
    "test_conv_with_strides_padding", "test_conv_with_autopad_same", "test_maxpool_2d_pads", "test_averagepool_2d_pads",
    "test_globalaveragepool", "test_batchnorm_example", "test_instancenorm_example", "test_layer_normalization_2d_axis0",
    "test_reshape_negative_dim", "test_flatten_axis0", "test_squeeze", "test_unsqueeze_axis_0", "test_transpose_default",
    "test_concat_2d_axis_0", "test_split_equal_parts_1d", "test_slice", "test_gather_0", "test_gather_elements_0",
    "test_gathernd_example_int32", "test_scatternd", "test_scatter_elements_with_axis", "test_expand_dim_changed",
    "test_tile", "test_constant_pad", "test_resize_upsample_scales_nearest", "test_upsample_nearest",
    "test_depthtospace_example", "test_spacetodepth_example", "test_softmax_axis_1", "test_hardmax_example",
    "test_reduce_mean_default_axes_keepdims_example", "test_reduce_sum_keepdims_example", "test_argmax_default_axis_example",
    "test_top_k", "test_cumsum_1d", "test_triu", "test_nonzero_example", "test_compress_0", "test_where_example",
    "test_onehot_with_axis", "test_range_float_type_positive_delta", "test_constantofshape_float_ones",
    "test_eyelike_with_dtype", "test_shape_start_1", "test_size", "test_cast_FLOAT_to_FLOAT16", "test_clip_example",
    "test_prelu_broadcast", "test_pow", "test_mod_mixed_sign_int32", "test_mvn", "test_lrn", "test_gemm_default_single_elem_vector_bias",
    "test_matmul_2d", "test_einsum_batch_matmul", "test_convtranspose", "test_quantizelinear", "test_dequantizelinear",
    "test_dynamicquantizelinear", "test_constant",
]


def f32(name, shape, seed=0):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def model(nodes, inputs, outputs, inits=(), opset=13, name="seed"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="qdeploy-seeds")
    m.ir_version = 8
    # Outputs are declared without a shape above; let ONNX's shape inference fill them in (the checker wants one).
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    del m.graph.value_info[:]
    onnx.checker.check_model(m)
    return m


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def seeds():
    x = vi("x", [1, 3, 8, 8])
    out = {}
    out["conv_relu_maxpool"] = model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="pool")],
        [x], [vi("y", None)], [f32("w", [4, 3, 3, 3]), f32("b", [4], 1)])
    out["conv_bn_silu_add"] = model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1], group=1, dilations=[1, 1]),
         helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], epsilon=1e-3),
         helper.make_node("Sigmoid", ["n"], ["sg"]),
         helper.make_node("Mul", ["n", "sg"], ["a"]),
         helper.make_node("Conv", ["a", "w2"], ["c2"], group=3, pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["c2", "x"], ["y"])],
        [x], [vi("y", None)],
        [f32("w", [3, 3, 3, 3]), f32("s", [3], 1), f32("bb", [3], 2), f32("m", [3], 3),
         numpy_helper.from_array(np.ones(3, np.float32), "v"), f32("w2", [3, 1, 3, 3], 4)])
    out["dynamic_batch_view"] = model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
         helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
         helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
         helper.make_node("Reshape", ["x", "shape"], ["flat"]),
         helper.make_node("Gemm", ["flat", "fc", "fb"], ["logits"], transB=1),
         helper.make_node("Softmax", ["logits"], ["y"], axis=1)],
        [vi("x", ["N", 2, 2, 2])], [vi("y", ["N", 5])],
        [numpy_helper.from_array(np.array(0, np.int64), "zero"), i64("ax", [0]), i64("m1", [-1]),
         f32("fc", [5, 8]), f32("fb", [5], 1)])
    out["constants_and_math"] = model(
        [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([0.5, 2.0], np.float32))),
         helper.make_node("Constant", [], ["e"], value_float=1e-5),
         helper.make_node("Mul", ["x", "k"], ["a"]),
         helper.make_node("Add", ["a", "e"], ["b"]),
         helper.make_node("Sqrt", ["b"], ["c"]),
         helper.make_node("Div", ["c", "k"], ["d"]),
         helper.make_node("Clip", ["d", "lo", "hi"], ["y"])],
        [vi("x", [3, 2])], [vi("y", None)],
        [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")])
    out["qdq_conv"] = model(
        [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["qx"]),
         helper.make_node("DequantizeLinear", ["qx", "sx", "zx"], ["dx"]),
         helper.make_node("DequantizeLinear", ["qw", "sw", "zw"], ["dw"], axis=0),
         helper.make_node("Conv", ["dx", "dw"], ["y"], kernel_shape=[1, 1])],
        [x], [vi("y", None)],
        [numpy_helper.from_array(np.array(0.02, np.float32), "sx"), numpy_helper.from_array(np.array(0, np.int8), "zx"),
         numpy_helper.from_array(np.arange(-6, 6, dtype=np.int8).reshape(4, 3, 1, 1), "qw"),
         numpy_helper.from_array(np.array([0.1, 0.2, 0.3, 0.4], np.float32), "sw"),
         numpy_helper.from_array(np.zeros(4, np.int8), "zw")])
    out["yolo_head_like"] = model(
        [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
         helper.make_node("Reshape", ["c", "shape"], ["r"]),
         helper.make_node("Transpose", ["r"], ["t"], perm=[0, 1, 3, 2]),
         helper.make_node("Split", ["t", "sizes"], ["xy", "wh", "conf"], axis=3),
         helper.make_node("Sigmoid", ["xy"], ["sxy"]),
         helper.make_node("Exp", ["wh"], ["ewh"]),
         helper.make_node("Concat", ["sxy", "ewh", "conf"], ["y"], axis=3)],
        [x], [vi("y", None)], [f32("w", [6, 3, 1, 1]), i64("shape", [1, 1, 6, 64]), i64("sizes", [2, 2, 2])])
    out["resize_slice_pad"] = model(
        [helper.make_node("Resize", ["x", "", "scales"], ["u"], mode="nearest"),
         helper.make_node("Slice", ["u", "starts", "ends", "axes"], ["s"]),
         helper.make_node("Pad", ["s", "pads"], ["p"], mode="constant"),
         helper.make_node("AveragePool", ["p"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
        [x], [vi("y", None)],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"), i64("starts", [1, 1]), i64("ends", [15, -1]),
         i64("axes", [2, 3]), i64("pads", [0, 0, 1, 1, 0, 0, 1, 1])])
    out["matmul_layernorm"] = model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("LayerNormalization", ["m", "g", "b"], ["n"], axis=-1),
         helper.make_node("ReduceMean", ["n"], ["y"], axes=[1], keepdims=1)],
        [vi("x", [2, 4, 6])], [vi("y", None)], [f32("w", [6, 8]), f32("g", [8], 1), f32("b", [8], 2)], opset=17)
    out["opset7_initializers_as_inputs"] = model(
        [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
         helper.make_node("Relu", ["g"], ["y"])],
        [vi("x", [1, 4]), vi("w", [3, 4]), vi("b", [3])], [vi("y", None)], [f32("w", [3, 4]), f32("b", [3], 1)], opset=7)
    return out


def npy_seeds():
    rng = np.random.default_rng(0)
    return {
        "f32_1x3x4x4": rng.standard_normal((1, 3, 4, 4)).astype(np.float32),
        "i64_vec": np.arange(5, dtype=np.int64),
        "u8_scalar": np.array(7, np.uint8),
        "bool_2x2": np.array([[True, False], [False, True]]),
        "f16_empty": np.zeros((0, 3), np.float16),
        "f64_big_endian": np.arange(3, dtype=">f8"),  # an error path: big-endian
        "fortran": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
    }


def write_npz_seeds():
    """numpy's own archives (stored with zip64 local headers; deflated) and a few error paths made with zipfile."""
    import zipfile
    os.makedirs(NPZ_DIR, exist_ok=True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    np.savez(os.path.join(NPZ_DIR, "savez_two_inputs.npz"), images=x, mask=np.array([[True, False]]))
    np.savez_compressed(os.path.join(NPZ_DIR, "savez_compressed.npz"), x=x, ids=np.arange(4, dtype=np.int64))
    np.savez(os.path.join(NPZ_DIR, "savez_positional.npz"), x, np.zeros((0, 2), np.float16))
    np.savez(os.path.join(NPZ_DIR, "empty.npz"))

    def npy_bytes(a):
        import io
        b = io.BytesIO()
        np.save(b, a)
        return b.getvalue()
    with zipfile.ZipFile(os.path.join(NPZ_DIR, "not_npy_member.npz"), "w") as z:
        z.writestr("readme.txt", "not an array")
    with zipfile.ZipFile(os.path.join(NPZ_DIR, "bzip2_member.npz"), "w", zipfile.ZIP_BZIP2) as z:
        z.writestr("x.npy", npy_bytes(x))
    with zipfile.ZipFile(os.path.join(NPZ_DIR, "comment_and_dirs.npz"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a/b.npy", npy_bytes(np.arange(3, dtype=np.int32)))
        z.comment = b"written by make_seeds.py"
    return len(os.listdir(NPZ_DIR))


def main():
    if sys.argv[1:] == ["--npz"]:
        print(f"wrote {write_npz_seeds()} npz files")
        return 0
    os.makedirs(ONNX_DIR, exist_ok=True)
    os.makedirs(NPY_DIR, exist_ok=True)
    for name, m in seeds().items():
        onnx.save(m, os.path.join(ONNX_DIR, name + ".onnx"))
    copied = 0
    for t in NODE_TEST_SEEDS:
        src = os.path.join(NODE_TESTS, t, "model.onnx")
        if os.path.exists(src) and os.path.getsize(src) < 4096:
            shutil.copyfile(src, os.path.join(ONNX_DIR, "node_" + t[len("test_"):] + ".onnx"))
            copied += 1
    for name, a in npy_seeds().items():
        np.save(os.path.join(NPY_DIR, name + ".npy"), a)
    # numpy writes version 2.0 only for huge headers: keep one hand-made 2.0 file too.
    with open(os.path.join(NPY_DIR, "v2_header.npy"), "wb") as f:
        header = b"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }"
        header += b" " * ((64 - (12 + len(header) + 1) % 64) % 64) + b"\n"
        f.write(b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header + np.array([1, 2], "<i4").tobytes())
    npz = write_npz_seeds()
    total = sum(os.path.getsize(os.path.join(d, f)) for d in (ONNX_DIR, NPY_DIR, NPZ_DIR) for f in os.listdir(d))
    print(f"wrote {len(seeds())} generated + {copied} node-test models, {len(npy_seeds()) + 1} npy files, {npz} npz "
          f"files; {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
