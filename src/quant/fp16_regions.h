// FP16 float regions of a Q/DQ model, for TensorRT's strongly typed networks (TensorRT 11; `--stronglyTyped` in 10.x).
// A strongly typed network computes every layer in the type of its input tensors: an ONNX model left in float32
// runs its float layers in FP32 (TensorRT's "Strongly Typed Networks" and "Working with DLA": "converting the model
// is what enables FP16 compute"). cast_float_regions_to_fp16 makes the layers left in float (not quantized) compute
// in FP16 the way ModelOpt's AutoCast does with `keep_io_types`: Cast(to=FLOAT16) where a float region reads an FP32
// tensor (a DequantizeLinear or INT8 layer output, a graph input, a float32 initializer: TensorRT folds the cast of
// a constant at build time) and Cast(to=FLOAT) where an FP32 reader (a QuantizeLinear, an INT8 layer, a graph output)
// reads a region's tensor. Q/DQ pairs and the INT8 layers between them keep float32 (opset-13 Q/DQ scales are
// float32, and a DequantizeLinear feeding the layer directly is the pattern TensorRT fuses); graph inputs and outputs
// keep their types.
//
// Names: an FP32 tensor keeps its name and its FP16 copy is "<name>_fp16"; a region's tensor read in FP32 is
// renamed "<name>_fp16" and the Cast back to float32 writes the original name, so Q/DQ scales, the graph outputs and
// a calibration cache still name the original tensors. widen_fp16_casts undoes exactly this when a Q/DQ model is
// imported (onnx/importer.h): qdeploy decides its float layers' precision itself (--precision, --fp16-layers), so
// the model builds as the one without the casts.
#pragma once

#include <set>
#include <string>

#include "ir/graph.h"

namespace qd {

struct Fp16RegionReport {
  int fp16_nodes = 0;                // nodes computing in FP16
  int casts_to_fp16 = 0, casts_to_fp32 = 0;
};

// `g` as written by insert_qdq (imported, not prepared); the nodes named in `keep_fp32` (the INT8 layers) and every
// QuantizeLinear/DequantizeLinear stay float32. A node computes in FP16 when its op computes in its data input's
// type (elementwise, activations, convolution and matrix products, pooling, normalization, softmax, reductions,
// shape-keeping data movement) and every input's type is known and its data input is float32; the rest (Cast,
// Shape, plugins, NonMaxSuppression, ...) stay as they are.
Expected<Graph> cast_float_regions_to_fp16(const Graph& g, const std::set<std::string>& keep_fp32,
                                           Fp16RegionReport* report = nullptr);

// The inverse, on import of a graph with QuantizeLinear/DequantizeLinear nodes: removes each Cast(to=FLOAT16) of a
// float32 tensor and each Cast(to=FLOAT) of an FP16 one (keeping the float32 tensor's name), and widens FP16
// initializers to float32 (exact). Graphs without Q/DQ, or with an FP16 input or output, are left as they are.
// Nodes in topological order. Returns the number of casts removed.
int widen_fp16_casts(Graph& g);

}  // namespace qd
