"""Deployment artefacts under `<run>/export/`, one registered writer per `export.formats` entry,
and their measurements: metrics.json's `compression` section.

Each writer builds into a temporary sibling and renames it into place, so an export
directory that exists is complete. Every figure is read back from what was written: sizes
from the files (raw, and gzip level 9, summed over a directory's files), accuracy of each
TFLite file from the TFLite interpreter on the validation split.
"""
from __future__ import annotations

import gzip
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
from tfhydra.errors import ConfigError, first_line
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
                          f"the {name} export failed ({type(error).__name__}: {reason[:200]})") from error


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
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
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
    """Size of every artefact; for TFLite files also interpreter accuracy and the ratios to the float32 reference."""
    artefacts = {written[name]: file_sizes(paths.export_format(name)) for name in written if name != "tflite"}
    if "tflite" not in written:
        return {"artefacts": artefacts}
    folder = paths.export_format("tflite")
    reference = folder / TFLITE_FLOAT32 if (folder / TFLITE_FLOAT32).is_file() else folder / TFLITE_MODEL
    reference_bytes = reference.stat().st_size
    for file in dict.fromkeys((folder / TFLITE_MODEL, reference)):
        interpreter = tflite_interpreter(file)
        entry = {**file_sizes(file), "input_type": np.dtype(interpreter.get_input_details()[0]["dtype"]).name,
                 "val_accuracy": accuracy(tflite_predict(interpreter), validation)}
        entry.update(ratio=reference_bytes / entry["bytes"], gzip_ratio=reference_bytes / entry["gzip_bytes"])
        if file.name == TFLITE_MODEL:
            entry["quantization"] = "int8" if compression.quantization_aware else cfg_tflite.quantization
        artefacts[paths.relative(file)] = entry
    return {"artefacts": artefacts, "float32_tflite": paths.relative(reference)}


def file_sizes(path: Path) -> dict:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {"bytes": sum(f.stat().st_size for f in files),
            "gzip_bytes": sum(len(gzip.compress(f.read_bytes(), compresslevel=9, mtime=0)) for f in files)}


def tflite_interpreter(path: Path) -> tf.lite.Interpreter:
    with warnings.catch_warnings():  # "deprecated in favour of ai_edge_litert": still TensorFlow's own interpreter
        warnings.simplefilter("ignore")
        return tf.lite.Interpreter(model_path=str(path))


def tflite_predict(interpreter: tf.lite.Interpreter) -> Callable[[np.ndarray], np.ndarray]:
    """Batch predictions of a TFLite model; int8 inputs and outputs are (de)quantized with the file's own scales."""
    source, target = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    allocated = []  # the batch shape the interpreter is allocated for

    def predict(x: np.ndarray) -> np.ndarray:
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
