"""Weight formats for the exported graph: every float matrix stored as fp16 or as int8 with one scale per row, turned
back into float32 inside the graph, so that only the weights are rounded and every sum still runs in float32."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FORMATS = ("fp32", "fp16", "int8")
MIN_ELEMENTS = 4096  # smaller tensors (biases, LayerNorm weights) stay float32: they are a rounding error in size


def convert(model: onnx.ModelProto, fmt: str) -> onnx.ModelProto:
    """A copy of `model` whose large float32 initializers are stored in `fmt` ("fp32", "fp16" or "int8")."""
    if fmt not in FORMATS:
        raise ValueError(f"weight format {fmt!r} is not one of {FORMATS}")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if fmt == "fp32":
        return out
    graph = out.graph
    kept, nodes = [], []
    for tensor in graph.initializer:
        if tensor.data_type != TensorProto.FLOAT or len(tensor.dims) < 2 or np.prod(tensor.dims) < MIN_ELEMENTS:
            kept.append(tensor)
            continue
        weight = numpy_helper.to_array(tensor)
        name = tensor.name
        if fmt == "fp16":
            kept.append(numpy_helper.from_array(weight.astype(np.float16), f"{name}__fp16"))
            nodes.append(helper.make_node("Cast", [f"{name}__fp16"], [name], to=TensorProto.FLOAT))
        else:
            rows = weight.reshape(weight.shape[0], -1)
            scale = np.abs(rows).max(axis=1) / 127  # symmetric: one scale per row, zero stays exactly zero
            scale[scale == 0] = 1
            quantized = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8).reshape(weight.shape)
            kept += [numpy_helper.from_array(quantized, f"{name}__int8"),
                     numpy_helper.from_array(scale.astype(np.float32), f"{name}__scale")]
            nodes.append(helper.make_node("DequantizeLinear", [f"{name}__int8", f"{name}__scale"], [name], axis=0))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    old = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + old)  # the casts first: the graph stays topologically sorted
    onnx.checker.check_model(out)
    return out
