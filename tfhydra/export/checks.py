"""What the run plan checks in the `export:` section: artefacts that could not be written, refused before
training rather than after it. No TensorFlow. The format names are declared here once: the schema's rule for
`export.formats` reads them, and a test holds them equal to the writers tfhydra/export/ registers."""

from __future__ import annotations

import importlib.util

from omegaconf import DictConfig

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, choice, integer, list_of

ONNX_PACKAGES = ("tf2onnx", "onnxruntime")  # the onnx extra: the writer, and the runtime that measures its file
# TensorFlow 2.21's converter has no working int8 for recurrent layers (docs/compression.md, "Text models"):
# calibrating GRU or masked LSTM layers kills the process (a segmentation fault, which no run can report), and an
# unmasked LSTM's int8 file predicts the same output for every input. tfhydra/export/ refuses it for models
# of your own too (when it converts).
INT8_RECURRENT = "TensorFlow's TFLite converter has no working int8 for recurrent layers"


def check_export(cfg: DictConfig) -> None:
    """Exports the config asks for that could not be written, refused before training rather than after it."""
    formats = cfg.export.formats
    missing = [name for name in ONNX_PACKAGES if "onnx" in formats and importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            "export.formats",
            "onnx",
            'pip install "tfhydra[onnx]", or export.formats without onnx',
            f"the ONNX export needs {' and '.join(missing)}, which is not installed",
        )
    tflite = cfg.export.get("tflite") or {}
    if "tflite" in formats and tflite.get("quantization") == "int8" and cfg.model.get("name") == "lstm":
        raise ConfigError(
            "export.tflite.quantization",
            "int8",
            "none, dynamic or float16 with model=lstm",
            f"{INT8_RECURRENT} (model.cell={cfg.model.get('cell')})",
        )


CHECKS = (check_export,)


TFLITE_MODEL, TFLITE_FLOAT32 = "model.tflite", "float32.tflite"  # the files of export/tflite/ (base.py re-exports)
ONNX_MODEL = "model.onnx"
FORMATS = ("saved_model", "keras", "tflite", "onnx")  # export.formats: the writers tfhydra/export/ registers

# The export section's ranges and choices, read by the schema's checks (tfhydra/config/schema.py).
RULES: dict[str, Rule] = {
    "export.formats": list_of(choice(*FORMATS), min_len=0),
    "export.tflite.quantization": choice("none", "dynamic", "float16", "int8"),
    "export.tflite.calibration_samples": integer(0),
    "export.tflite.integer_io": choice(True, False),
}
