"""TFLite files: written by TensorFlow's converter (post-training quantization, int8 calibration, recurrent
models from a batch-of-one function) and run by LiteRT (`ai-edge-litert`), the runtime they are deployed with."""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.errors import ConfigError
from tfhydra.export.base import EXPORT_FORMATS, TFLITE_FLOAT32, TFLITE_MODEL, Deployment
from tfhydra.platform.keras_lib import keras


@EXPORT_FORMATS.register("tflite")
def write_tflite(deployment: Deployment, path: Path) -> None:
    """`model.tflite` as `export.tflite.*` asks, and `float32.tflite` (the same weights, not quantized: the size
    reference) unless model.tflite is that already."""
    cfg = deployment.cfg_tflite
    path.mkdir(parents=True)
    calibration = (
        calibration_examples(deployment.train, cfg.calibration_samples)
        if cfg.quantization == "int8" and cfg.calibration_samples
        else None
    )
    (path / TFLITE_MODEL).write_bytes(
        convert(deployment.model, cfg.quantization, deployment.quantization_aware, calibration, cfg.integer_io)
    )
    if cfg.quantization != "none" or deployment.quantization_aware:
        (path / TFLITE_FLOAT32).write_bytes(convert(deployment.float_twin(), "none"))


def convert(
    model: keras.Model,
    quantization: str,
    quantization_aware: bool = False,
    calibration: Callable | None = None,
    integer_io: bool = False,
) -> bytes:
    if quantization == "int8" and (recurrent := recurrent_layers(model)):
        raise ConfigError(
            "export.tflite.quantization",
            "int8",
            "none, dynamic or float16 for this model",
            f"TensorFlow's TFLite converter has no working int8 for recurrent layers "
            f"({type(recurrent[0]).__name__} layer {recurrent[0].name}; docs/compression.md)",
        )
    converter = tflite_converter(model)
    if quantization != "none" or quantization_aware:
        # A QAT model needs it too: it turns the learned ranges into int8 kernels (without: float fake-quant ops).
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]
    if quantization == "int8":
        converter.representative_dataset = calibration
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]  # every op int8, or fail
        if integer_io:
            converter.inference_input_type = converter.inference_output_type = tf.int8
    with warnings.catch_warnings():  # a QAT model's input range is its QuantizeLayer's: no statistics needed
        warnings.filterwarnings("ignore", message="Statistics for quantized inputs were expected")
        return converter.convert()


def calibration_examples(train: tf.data.Dataset, samples: int) -> Callable:
    """The converter's representative dataset: `samples` single examples from the training pipeline."""

    def examples():
        for x, _ in train.unbatch().take(samples).batch(1):
            yield [x]

    return examples


def tflite_interpreter(path: Path):
    """The interpreter of `tflite_runtime()` (LiteRT's, or TensorFlow's where LiteRT is missing) on one file."""
    interpreter_type, _ = tflite_runtime()
    with warnings.catch_warnings():  # tf.lite.Interpreter: "deprecated in favour of ai_edge_litert", said once
        warnings.simplefilter("ignore")
        return interpreter_type(model_path=str(path))


def tflite_predict(interpreter) -> Callable[[np.ndarray], np.ndarray]:
    """Batch predictions of a TFLite model; int8 inputs and outputs are (de)quantized with the file's own scales.
    A file with a static batch of one (a recurrent model's, see `tflite_converter`) is run one example at a time."""
    source, target = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    allocated: list[int] = []  # the batch shape the interpreter is allocated for

    def predict(x: np.ndarray) -> np.ndarray:
        if source["shape_signature"][0] == 1 and len(x) > 1:
            return np.concatenate([predict(x[i : i + 1]) for i in range(len(x))])
        if allocated != list(x.shape):
            interpreter.resize_tensor_input(source["index"], list(x.shape))
            interpreter.allocate_tensors()
            allocated[:] = list(x.shape)
        if np.issubdtype(source["dtype"], np.integer) and np.issubdtype(x.dtype, np.floating):
            scale, zero = source["quantization"]
            limits = np.iinfo(source["dtype"])
            x = np.clip(np.round(x / scale + zero), limits.min, limits.max)
        interpreter.set_tensor(source["index"], x.astype(source["dtype"]))
        interpreter.invoke()
        y = interpreter.get_tensor(target["index"])
        if np.issubdtype(y.dtype, np.integer) and target["quantization"][0]:
            scale, zero = target["quantization"]
            y = (y.astype(np.float32) - zero) * scale
        return y

    return predict


@functools.cache
def tflite_runtime() -> tuple[type, str]:
    """(interpreter type, its name for the record): LiteRT's interpreter, the runtime TFLite files are deployed
    with since TensorFlow 2.20 deprecated `tf.lite.Interpreter`; TensorFlow's own where LiteRT is not installed."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        logging.getLogger("tfhydra").warning(
            "ai-edge-litert is not installed: TFLite accuracy is measured with tf.lite.Interpreter, deprecated "
            "since TensorFlow 2.20 (pip install ai-edge-litert)"
        )
        return tf.lite.Interpreter, f"tf.lite.Interpreter (TensorFlow {tf.__version__})"
    return Interpreter, f"ai-edge-litert {importlib.metadata.version('ai-edge-litert')}"


def recurrent_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The RNN layers of `model` at any depth (inside Bidirectional wrappers and nested models too)."""
    from tfhydra.platform.private_api import nested_layers

    return [layer for layer in nested_layers(model) if isinstance(layer, keras.layers.RNN)]


def tflite_converter(model: keras.Model) -> tf.lite.TFLiteConverter:
    """The TFLite converter of `model`. A recurrent layer's loop converts to TFLite builtins (a fused
    UnidirectionalSequenceLSTM, or a While loop over a tensor list) only with a static batch size: from the Keras
    model (batch None) the converter stops at `tf.TensorListReserve`. Such a model converts from a batch-of-one
    function, so its file takes one example per call, as on a device. No TensorFlow (Flex) ops: LiteRT runs it
    as it is. (An unmasked LSTM becomes the fused op, whose outputs differ from Keras': docs/compression.md.)"""
    if not recurrent_layers(model):
        return tf.lite.TFLiteConverter.from_keras_model(model)
    signature = [
        tf.TensorSpec([1, *x.shape[1:]], x.dtype, name=name)
        for x, name in zip(model.inputs, model.input_names, strict=True)
    ]
    function = tf.function(lambda *x: model(list(x) if len(x) > 1 else x[0], training=False))
    return tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function(*signature)], model)
