"""ONNX files: written by tf2onnx and run by onnxruntime (the `onnx` extra)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.export.base import EXPORT_FORMATS, ONNX_MODEL, Deployment


@EXPORT_FORMATS.register("onnx")
def write_onnx(deployment: Deployment, path: Path) -> None:
    """`model.onnx` by tf2onnx (the `onnx` extra; opset 15, its default), the batch dimension free; its input is
    `inputs`, as in the SavedModel's `serve` signature (several inputs keep the model's input names). The float
    weights as trained; a quantization-aware model's learned ranges become QuantizeLinear/DequantizeLinear pairs."""
    import tf2onnx  # the onnx extra: the run plan refuses export.formats=[onnx] without it

    logging.getLogger("tf2onnx").setLevel(logging.WARNING)  # its INFO lines (every folded constant) drown train.log
    model = deployment.model
    names = model.input_names if len(model.inputs) > 1 else ["inputs"]
    signature = [
        tf.TensorSpec([None, *x.shape[1:]], x.dtype, name=name) for x, name in zip(model.inputs, names, strict=True)
    ]
    path.mkdir(parents=True)
    proto, _ = tf2onnx.convert.from_keras(
        model, input_signature=signature, custom_op_handlers={"Erfc": (onnx_erfc, [])}
    )
    (path / ONNX_MODEL).write_bytes(proto.SerializeToString())


def onnx_erfc(graph, node, name, args) -> None:
    """tf2onnx 1.17 has no handler for TensorFlow's Erfc, which TF 2.21's exact GELU (0.5·x·erfc(-x/√2), the
    Transformer's MLP) uses: rewrite it as 1 - Erf(x)."""
    from tf2onnx import utils

    dtype = utils.map_onnx_to_numpy_type(graph.get_dtype(node.input[0]))
    erf = graph.make_node("Erf", [node.input[0]])
    one = graph.make_const(utils.make_name(f"{name}_one"), np.array(1, dtype))
    node.type, node.domain = "Sub", ""
    graph.replace_inputs(node, [one.output[0], erf.output[0]])


def onnx_predict(path: Path) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
    """(batch predictions of an ONNX file by onnxruntime on the CPU, the runtime's name for the record)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return (lambda x: session.run(None, {name: x})[0]), f"onnxruntime {onnxruntime.__version__}"
