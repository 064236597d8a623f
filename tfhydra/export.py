"""Deployment artefacts under `<run>/export/`, one registered writer per `export.formats` entry,
and their measurements: metrics.json's `compression` section.

Each writer builds into a temporary sibling and renames it into place, so an export
directory that exists is complete. Every figure is read back from what was written: sizes
from the files (raw, and gzip level 9, summed over a directory's files), accuracy on the validation
split of each TFLite file by LiteRT (`ai-edge-litert`; TensorFlow's deprecated `tf.lite.Interpreter`
where LiteRT is missing) and of the ONNX file by onnxruntime, each entry naming its runtime.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import importlib.metadata
import logging
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import tensorflow as tf
import tf_keras as keras
from omegaconf import DictConfig

from tfhydra.contracts import Compression
from tfhydra.errors import ConfigError, clip, first_line
from tfhydra.registry import Registry
from tfhydra.rundir import RunPaths

EXPORT_FORMATS = Registry("export.formats")
TFLITE_MODEL, TFLITE_FLOAT32 = "model.tflite", "float32.tflite"


@dataclass
class Deployment:
    """What the writers work from."""
    model: keras.Model  # stripped, with the best epoch's weights
    float_twin: Callable[[], keras.Model]  # the same weights in float32 layers (the TFLite float32 reference)
    quantization_aware: bool  # the model holds learned int8 ranges: its TFLite file is int8 whatever export asks
    cfg_tflite: DictConfig  # export.tflite
    train: tf.data.Dataset  # the training pipeline, batched: int8 calibration examples come from it
    serving: object = None  # tfhydra.data.source.Serving: the data as stored -> model inputs, in the export


def export_model(cfg_export: DictConfig, compression: Compression, trained: keras.Model, datasets,
                 run_dir: Path) -> tuple[dict[str, str], dict]:
    """Strip, write every format, measure: ({format: path in the run dir}, metrics.json's `compression` section)."""
    paths = RunPaths(run_dir)
    deployable = compression.strip(trained)
    deployment = Deployment(deployable, lambda: compression.float_twin(deployable), compression.quantization_aware,
                            cfg_export.tflite, datasets.train, getattr(datasets, "serving", None))
    written = {}
    for name in cfg_export.formats:
        target = paths.export_format(name)
        partial = target.with_name(f".{name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        write_format(name, deployment, partial, list(cfg_export.formats))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        written[name] = paths.relative(target)
    if "saved_model" in written:
        serving_layout(paths)
    figures = {"scheme": compression.scheme, **compression.measure(deployable),
               "keras_val_accuracy": accuracy(lambda x: deployable(x, training=False).numpy(), datasets.validation)}
    figures.update(measure_artefacts(paths, written, datasets.validation, cfg_export.tflite, compression))
    return written, figures


def write_format(name: str, deployment: Deployment, path: Path, formats: list[str]) -> None:
    """One writer; a converter that refuses the model is one line naming the format (the trained model is kept,
    so the run can be finished without that format). A full disk stays an OSError: the job reports it as such."""
    try:
        EXPORT_FORMATS.get(name)(deployment, path)
    except (OSError, ConfigError, KeyboardInterrupt):
        shutil.rmtree(path, ignore_errors=True)
        raise
    except Exception as error:
        shutil.rmtree(path, ignore_errors=True)
        reason = re.sub(r"^\S+:\d+:\d+: error: ", "", first_line(error))  # the converter's "<file>:<line>:<col>: error: "
        others = [f for f in formats if f != name]
        raise ConfigError("export.formats", name, f"export.formats=[{','.join(others)}] (the trained model is kept: "
                          "the same command with that override finishes the run)",
                          f"the {name} export failed ({type(error).__name__}: {clip(reason, 200)})") from error


@EXPORT_FORMATS.register("saved_model")
def write_saved_model(deployment: Deployment, path: Path) -> None:
    """Inference-only SavedModel that takes the data as the source stores them.

    Endpoints (and signatures of the same names): `serve_raw` takes raw examples (uint8 images at their stored
    size, raw CSV feature columns, strings) and runs the source's preprocessing (the fitted Normalization or
    TextVectorization layer is saved with it) before the model; `serve` takes the model's inputs, as the
    training pipeline feeds them. `serving_default`, what TF Serving and `saved_model_cli` call by default, is
    `serve_raw` when the source can describe its raw data, else `serve` (docs/deploy.md)."""
    model, serving = deployment.model, deployment.serving
    archive = keras.export.ExportArchive()
    archive.track(model)
    features = [tf.TensorSpec([None, *model.inputs[0].shape[1:]], model.inputs[0].dtype, name="inputs")]
    if serving is not None:
        for layer in serving.layers:
            archive.track(layer)
        raw = tf.TensorSpec([None, *serving.raw.shape], serving.raw.dtype, name="inputs")

        def serve_raw(inputs):
            return model(serving.prepare(inputs), training=False)

        archive.add_endpoint("serve_raw", serve_raw, [raw])  # the first endpoint: also `serving_default`
    archive.add_endpoint("serve", lambda inputs: model(inputs, training=False), features)
    interactive = keras.utils.is_interactive_logging_enabled()
    keras.utils.disable_interactive_logging()  # export prints every endpoint; send that to the log instead
    try:
        archive.write_out(str(path))
    finally:
        if interactive:
            keras.utils.enable_interactive_logging()


def serving_layout(paths: RunPaths) -> None:
    """`export/serving/1/`, the layout TF Serving polls (`--model_base_path=<run>/export/serving`): version 1 is
    the run's SavedModel, linked (relative, inside the run directory) rather than written twice."""
    version = paths.serving / "1"
    version.parent.mkdir(parents=True, exist_ok=True)
    if version.is_symlink() or version.exists():
        version.unlink()
    version.symlink_to(Path("..") / paths.saved_model.name, target_is_directory=True)


@EXPORT_FORMATS.register("keras")
def write_keras(deployment: Deployment, path: Path) -> None:
    """`model.keras`, the tf_keras file; a quantization-aware model as `model.h5`, which loads inside
    `tfmot.quantization.keras.quantize_scope()` (tf_keras 2.21 cannot reload tfmot's QuantizeLayer
    from a `.keras` file: it expects 5 variables and finds 3)."""
    path.mkdir(parents=True)
    with warnings.catch_warnings():  # "HDF5 is a legacy format": chosen on purpose, see above
        warnings.simplefilter("ignore")
        deployment.model.save(str(path / ("model.h5" if deployment.quantization_aware else "model.keras")))


@EXPORT_FORMATS.register("tflite")
def write_tflite(deployment: Deployment, path: Path) -> None:
    """`model.tflite` as `export.tflite.*` asks, and `float32.tflite` (the same weights, not quantized: the size
    reference) unless model.tflite is that already."""
    cfg = deployment.cfg_tflite
    path.mkdir(parents=True)
    calibration = calibration_examples(deployment.train, cfg.calibration_samples) \
        if cfg.quantization == "int8" and cfg.calibration_samples else None
    (path / TFLITE_MODEL).write_bytes(convert(deployment.model, cfg.quantization, deployment.quantization_aware,
                                              calibration, cfg.integer_io))
    if cfg.quantization != "none" or deployment.quantization_aware:
        (path / TFLITE_FLOAT32).write_bytes(convert(deployment.float_twin(), "none"))


def convert(model: keras.Model, quantization: str, quantization_aware: bool = False,
            calibration: Callable | None = None, integer_io: bool = False) -> bytes:
    if quantization == "int8" and (recurrent := recurrent_layers(model)):
        raise ConfigError("export.tflite.quantization", "int8", "none, dynamic or float16 for this model",
                          f"TensorFlow's TFLite converter has no working int8 for recurrent layers "
                          f"({type(recurrent[0]).__name__} layer {recurrent[0].name}; docs/compression.md)")
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


def measure_artefacts(paths: RunPaths, written: dict[str, str], validation: tf.data.Dataset, cfg_tflite: DictConfig,
                      compression: Compression) -> dict:
    """Size of every artefact; for TFLite and ONNX files also their runtime's accuracy, for TFLite files the ratios
    to the float32 reference."""
    artefacts = {written[name]: file_sizes(paths.export_format(name)) for name in written
                 if name not in ("tflite", "onnx")}
    if "onnx" in written:
        file = paths.export_format("onnx") / ONNX_MODEL
        with runtime_errors("onnx", written, paths.export_format("onnx")):
            predict, runtime = onnx_predict(file)
            measured = accuracy(predict, validation)
        artefacts[paths.relative(file)] = {**file_sizes(file), "val_accuracy": measured, "runtime": runtime}
    if "tflite" not in written:
        return {"artefacts": artefacts}
    folder = paths.export_format("tflite")
    reference = folder / TFLITE_FLOAT32 if (folder / TFLITE_FLOAT32).is_file() else folder / TFLITE_MODEL
    reference_bytes = reference.stat().st_size
    for file in dict.fromkeys((folder / TFLITE_MODEL, reference)):
        with runtime_errors("tflite", written, folder):
            interpreter = tflite_interpreter(file)
            measured = accuracy(tflite_predict(interpreter), validation)
        entry = {**file_sizes(file), "input_type": np.dtype(interpreter.get_input_details()[0]["dtype"]).name,
                 "val_accuracy": measured, "runtime": tflite_runtime()[1]}
        entry.update(ratio=reference_bytes / entry["bytes"], gzip_ratio=reference_bytes / entry["gzip_bytes"])
        if file.name == TFLITE_MODEL:
            entry["quantization"] = "int8" if compression.quantization_aware else cfg_tflite.quantization
        artefacts[paths.relative(file)] = entry
    return {"artefacts": artefacts, "float32_tflite": paths.relative(reference)}


@contextlib.contextmanager
def runtime_errors(name: str, written: dict[str, str], folder: Path):
    """A file the converter wrote that its runtime cannot run (TFLite's converter emits a broken graph for some
    ops): removed, and one line naming the format, as a converter's refusal is (`write_format`); the trained
    model is kept."""
    try:
        yield
    except (OSError, ConfigError, KeyboardInterrupt):
        raise
    except Exception as error:
        shutil.rmtree(folder, ignore_errors=True)
        others = [f for f in written if f != name]
        raise ConfigError("export.formats", name, f"export.formats=[{','.join(others)}] (the trained model is kept: "
                          "the same command with that override finishes the run)",
                          f"the {name} file does not run in its runtime ({type(error).__name__}: "
                          f"{clip(first_line(error), 200)})") from error


def file_sizes(path: Path) -> dict:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {"bytes": sum(f.stat().st_size for f in files),
            "gzip_bytes": sum(len(gzip.compress(f.read_bytes(), compresslevel=9, mtime=0)) for f in files)}


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
    allocated = []  # the batch shape the interpreter is allocated for

    def predict(x: np.ndarray) -> np.ndarray:
        if source["shape_signature"][0] == 1 and len(x) > 1:
            return np.concatenate([predict(x[i:i + 1]) for i in range(len(x))])
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


def accuracy(predict: Callable[[np.ndarray], np.ndarray], validation: tf.data.Dataset) -> float:
    """Top-1 accuracy over the validation split (labels as class ids or one-hot)."""
    correct = total = 0
    for x, y in validation:
        labels = np.asarray(y).reshape(len(y), -1)
        labels = labels.argmax(axis=-1) if labels.shape[1] > 1 else labels[:, 0]
        correct += int(np.sum(np.argmax(predict(np.asarray(x)), axis=-1) == labels))
        total += len(labels)
    return correct / total if total else float("nan")


# --- the runtimes that run the artefacts (issue 18) -------------------------------------------------------------

@functools.cache
def tflite_runtime() -> tuple[type, str]:
    """(interpreter type, its name for the record): LiteRT's interpreter, the runtime TFLite files are deployed
    with since TensorFlow 2.20 deprecated `tf.lite.Interpreter`; TensorFlow's own where LiteRT is not installed."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        logging.getLogger("tfhydra").warning(
            "ai-edge-litert is not installed: TFLite accuracy is measured with tf.lite.Interpreter, deprecated "
            "since TensorFlow 2.20 (pip install ai-edge-litert)")
        return tf.lite.Interpreter, f"tf.lite.Interpreter (TensorFlow {tf.__version__})"
    return Interpreter, f"ai-edge-litert {importlib.metadata.version('ai-edge-litert')}"


def recurrent_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The RNN layers of `model` at any depth (inside Bidirectional wrappers and nested models too)."""
    return [layer for layer in model.submodules if isinstance(layer, keras.layers.RNN)]


def tflite_converter(model: keras.Model) -> tf.lite.TFLiteConverter:
    """The TFLite converter of `model`. A recurrent layer's loop converts to TFLite builtins (a fused
    UnidirectionalSequenceLSTM, or a While loop over a tensor list) only with a static batch size: from the Keras
    model (batch None) the converter stops at `tf.TensorListReserve`. Such a model converts from a batch-of-one
    function, so its file takes one example per call, as on a device. No TensorFlow (Flex) ops: LiteRT runs it
    as it is. (An unmasked LSTM becomes the fused op, whose outputs differ from Keras': docs/compression.md.)"""
    if not recurrent_layers(model):
        return tf.lite.TFLiteConverter.from_keras_model(model)
    signature = [tf.TensorSpec([1, *x.shape[1:]], x.dtype, name=name)
                 for x, name in zip(model.inputs, model.input_names)]
    function = tf.function(lambda *x: model(list(x) if len(x) > 1 else x[0], training=False))
    return tf.lite.TFLiteConverter.from_concrete_functions([function.get_concrete_function(*signature)], model)


ONNX_MODEL = "model.onnx"


@EXPORT_FORMATS.register("onnx")
def write_onnx(deployment: Deployment, path: Path) -> None:
    """`model.onnx` by tf2onnx (the `onnx` extra; opset 15, its default), the batch dimension free; its input is
    `inputs`, as in the SavedModel's `serve` signature (several inputs keep the model's input names). The float
    weights as trained; a quantization-aware model's learned ranges become QuantizeLinear/DequantizeLinear pairs."""
    import tf2onnx  # the onnx extra: the run plan refuses export.formats=[onnx] without it

    logging.getLogger("tf2onnx").setLevel(logging.WARNING)  # its INFO lines (every folded constant) drown train.log
    model = deployment.model
    names = model.input_names if len(model.inputs) > 1 else ["inputs"]
    signature = [tf.TensorSpec([None, *x.shape[1:]], x.dtype, name=name) for x, name in zip(model.inputs, names)]
    path.mkdir(parents=True)
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=signature,
                                          custom_op_handlers={"Erfc": (onnx_erfc, [])})
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
