"""qdeploy's PyTorch side: model definitions, training, quantization-aware training and ONNX export.

The C++ toolkit consumes what this package exports (plain FP32 ONNX, or QAT ONNX with QuantizeLinear /
DequantizeLinear pairs); nothing here is needed at inference time.
"""
