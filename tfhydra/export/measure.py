"""What the export measures, read back from the files written: sizes (raw and gzip level 9, summed over a
directory's files), and each TFLite and ONNX file's accuracy on the validation split in its own runtime."""

from __future__ import annotations

import contextlib
import gzip
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfhydra.config.contracts import Compression, Head
from tfhydra.config.errors import ConfigError, clip, first_line
from tfhydra.export.base import ONNX_MODEL, TFLITE_FLOAT32, TFLITE_MODEL
from tfhydra.export.onnx import onnx_predict
from tfhydra.export.schemas import TfliteConfig
from tfhydra.export.tflite import tflite_interpreter, tflite_predict, tflite_runtime
from tfhydra.record.rundir import RunPaths


def measure_artefacts(
    paths: RunPaths,
    written: dict[str, str],
    validation: tf.data.Dataset,
    cfg_tflite: TfliteConfig,
    compression: Compression,
    test: tf.data.Dataset | None = None,
    head: Head | None = None,
) -> dict:
    """Size of every artefact; for TFLite and ONNX files also their runtime's accuracy (`val_accuracy` on the
    validation split, `test_accuracy` on the test split when the run has one), for TFLite files the ratios to the
    float32 reference."""
    artefacts = {
        written[name]: file_sizes(paths.export_format(name)) for name in written if name not in ("tflite", "onnx")
    }
    if "onnx" in written:
        file = paths.export_format("onnx") / ONNX_MODEL
        with runtime_errors("onnx", written, paths.export_format("onnx")):
            predict, runtime = onnx_predict(file)
            measured = accuracy(predict, validation, head)
            tested = {"test_accuracy": accuracy(predict, test, head)} if test is not None else {}
        artefacts[paths.relative(file)] = {**file_sizes(file), "val_accuracy": measured, **tested, "runtime": runtime}
    if "tflite" not in written:
        return {"artefacts": artefacts}
    folder = paths.export_format("tflite")
    reference = folder / TFLITE_FLOAT32 if (folder / TFLITE_FLOAT32).is_file() else folder / TFLITE_MODEL
    reference_bytes = reference.stat().st_size
    for file in dict.fromkeys((folder / TFLITE_MODEL, reference)):
        with runtime_errors("tflite", written, folder):
            interpreter = tflite_interpreter(file)
            measured = accuracy(tflite_predict(interpreter), validation, head)
            tested = {"test_accuracy": accuracy(tflite_predict(interpreter), test, head)} if test is not None else {}
        entry = {
            **file_sizes(file),
            "input_type": np.dtype(interpreter.get_input_details()[0]["dtype"]).name,
            "val_accuracy": measured,
            **tested,
            "runtime": tflite_runtime()[1],
        }
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
        raise ConfigError(
            "export.formats",
            name,
            f"export.formats=[{','.join(others)}] (the trained model is kept: "
            "the same command with that override finishes the run)",
            f"the {name} file does not run in its runtime ({type(error).__name__}: {clip(first_line(error), 200)})",
        ) from error


def file_sizes(path: Path) -> dict:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {
        "bytes": sum(f.stat().st_size for f in files),
        "gzip_bytes": sum(len(gzip.compress(f.read_bytes(), compresslevel=9, mtime=0)) for f in files),
    }


def keras_predict(model) -> Callable[[np.ndarray], np.ndarray]:
    """The Keras model's outputs for one batch, as NumPy, through one `tf.function` (`reduce_retracing`: a last,
    smaller batch traces once more at most, with an unknown batch size). Called eagerly, each batch paid Keras'
    per-call overhead: for the 3-layer MLP, validation and test (2 x 64 batches) took 0.31 s of CPU this way
    against 0.16 s compiled (docs/performance.md, "Tasks")."""
    call = tf.function(lambda x: model(x, training=False), reduce_retracing=True)
    return lambda x: call(x).numpy()


def accuracy(
    predict: Callable[[np.ndarray], np.ndarray], validation: tf.data.Dataset, head: Head | None = None
) -> float | None:
    """Top-1 accuracy over the validation split (labels as class ids or one-hot) for a softmax head; for a sigmoid
    head (binary, multi-label) the share of outputs on the label's side of 0.5; None for a head without classes
    (a linear one: regression), whose artefacts are measured by evaluate (tfhydra/evaluate.py) instead."""
    if head is not None and head.activation == "linear":
        return None
    if head is not None and head.activation == "sigmoid":
        agree = [np.asarray(predict(np.asarray(x)) >= 0.5) == (np.asarray(y) >= 0.5) for x, y in validation]
        return float(np.mean(np.concatenate([a.reshape(-1) for a in agree]))) if agree else float("nan")
    correct = total = 0
    for x, y in validation:
        labels = np.asarray(y).reshape(len(y), -1)
        labels = labels.argmax(axis=-1) if labels.shape[1] > 1 else labels[:, 0]
        correct += int(np.sum(np.argmax(predict(np.asarray(x)), axis=-1) == labels))
        total += len(labels)
    return correct / total if total else float("nan")
