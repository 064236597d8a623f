"""A finished run's export, to run again: which file answers (the SavedModel, else the TFLite file), and the
TFLite file as a batch predictor through the export's own runtime code (tflite.py: LiteRT, or tf.lite.Interpreter
where LiteRT is missing), and the SavedModel loaded with the ops its graph names, for tfhydra-predict and
tfhydra-evaluate.

The SavedModel comes first when a run has both: it serves the data as stored (its `serve_raw` holds the source's
preprocessing). A TFLite file holds the model only: it takes the model's inputs as the training pipeline feeds
them (images as [0, 1] floats at the model's size, standardized CSV columns, token ids), in float even when the
file's own input is int8 (`export.tflite.integer_io`: quantized with the file's scales by `tflite_predict`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfhydra.config.errors import ConfigError, clip, first_line
from tfhydra.export.checks import TFLITE_MODEL
from tfhydra.record.rundir import RunPaths

SAVED_MODEL, TFLITE = "saved_model", "tflite"


def served_export(run_dir: Path) -> tuple[str, str]:
    """(the format that answers for the run, its file relative to the run directory): the SavedModel when the run
    has one, else its TFLite file; the SavedModel's file when it has neither, for the error to name. No TensorFlow:
    the commands ask before they import it."""
    paths = RunPaths(run_dir)
    saved = paths.relative(paths.saved_model / "saved_model.pb")
    tflite = paths.relative(paths.export_format(TFLITE) / TFLITE_MODEL)
    if not (Path(run_dir) / saved).exists() and (Path(run_dir) / tflite).is_file():
        return TFLITE, tflite
    return SAVED_MODEL, saved


@dataclass
class TFLiteModel:
    """A run's TFLite file, ready to predict: model inputs (a batch, float or the file's own dtype) -> probabilities."""

    predict: Callable[[np.ndarray], np.ndarray]
    input_shape: tuple[int, ...]  # one example, no batch axis
    input_dtype: Any  # tf.DType; what to feed: float32 for a file with int8 input (quantized on the way in)
    classes: int
    runtime: str  # LiteRT's name and version, for the output


def load_tflite(run_dir: Path, accepted: str) -> TFLiteModel:
    """The run's `export/tflite/model.tflite` in the runtime the export measured it with; a file that does not load
    is one ConfigError naming the run directory."""
    import tensorflow as tf

    from tfhydra.export.tflite import tflite_interpreter, tflite_predict, tflite_runtime

    file = RunPaths(run_dir).export_format(TFLITE) / TFLITE_MODEL
    try:
        interpreter = tflite_interpreter(file)
        source, target = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    except Exception as error:  # noqa: BLE001  (a truncated or foreign file: the runtime's message, on one line)
        raise ConfigError(
            str(run_dir),
            None,
            accepted,
            f"its {RunPaths(run_dir).relative(file)} cannot be loaded "
            f"({type(error).__name__}: {clip(first_line(error), 200)})",
        ) from error
    shape = tuple(int(d) for d in source["shape_signature"][1:])
    dtype = tf.as_dtype(source["dtype"])
    quantized_input = dtype.is_integer and bool(source["quantization"][0])
    return TFLiteModel(
        tflite_predict(interpreter),
        shape,
        tf.float32 if quantized_input else dtype,
        int(target["shape"][-1]),
        tflite_runtime()[1],
    )


def saved_model_with_its_ops(path: str, accepted: str = "a SavedModel tfhydra exported"):
    """`tf.saved_model.load`, retried once with TensorFlow Text's ops registered (importing tensorflow_text registers
    them) when the graph uses one TensorFlow does not know: a keras-hub tokenizer's (model=keras_hub, the hub
    extra). Imported only then, so loading any other export costs no import. Its graph's ops are read first
    (tfhydra/trust/saved_model_ops.py: none that reads or writes files or runs Python), `accepted` said if not."""
    import tensorflow as tf

    from tfhydra.trust.saved_model_ops import check_saved_model

    check_saved_model(Path(path), accepted)

    try:
        return tf.saved_model.load(path)
    except Exception as error:  # noqa: BLE001  (TensorFlow raises a RuntimeError or NotFoundError for it)
        if "Op type not registered" not in str(error) or importlib.util.find_spec("tensorflow_text") is None:
            raise
    import tensorflow_text  # noqa: F401  (registers its ops)

    return tf.saved_model.load(path)


def loaded_export(format: str, path: Path) -> Any:
    """One format of a run's export, loaded for Python (`tfhydra.Result.load_model`): `keras` the model of
    `export/keras/model.keras`, its archive checked first (tfhydra/trust/keras_archive.py: a run directory is data);
    `tflite` an allocated interpreter; `saved_model` the SavedModel. A quantization-aware run's Keras file is
    `model.h5`, loadable only inside the Model Optimization Toolkit's scope: one line pointing at the others."""
    if format == "keras":
        from tfhydra.platform.keras_lib import keras
        from tfhydra.trust.hdf5 import weight_shapes
        from tfhydra.trust.keras_archive import checked_keras_archive

        file = path / "model.keras" if path.is_dir() else path
        if not file.is_file():
            raise ConfigError(
                "format",
                format,
                "saved_model or tflite",
                f"{path} holds no model.keras (a quantization-aware "
                "model is kept as model.h5, which loads only inside tfmot's quantize_scope)",
            )
        checked_keras_archive(file, lambda config: weight_shapes(keras.saving.deserialize_keras_object(config)))
        return keras.models.load_model(str(file))
    if format == TFLITE:
        import tensorflow as tf

        interpreter = tf.lite.Interpreter(model_path=str(path / TFLITE_MODEL if path.is_dir() else path))
        interpreter.allocate_tensors()
        return interpreter
    return saved_model_with_its_ops(str(path))
