"""The export room's base: the registry of `export.formats` writers and what they work from.

The writers (savedmodel.py: saved_model and keras; tflite.py; onnx.py) import this module and register
themselves; `EXPORT_FORMATS` names their modules and imports them on its first lookup. Format names are declared
once, in checks.py (`FORMATS`): the schema reads them, and a test checks them against this registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from tfhydra.config.registry import Registry
from tfhydra.export.schemas import TfliteConfig
from tfhydra.platform.keras_lib import keras

EXPORT_FORMATS = Registry(  # the writers, each in its module, imported on the first lookup
    "export.formats", locations=["tfhydra.export.savedmodel", "tfhydra.export.tflite", "tfhydra.export.onnx"]
)
from tfhydra.export.checks import ONNX_MODEL, TFLITE_FLOAT32, TFLITE_MODEL  # noqa: E402,F401  (declared once there)


@dataclass
class Deployment:
    """What the writers work from."""

    model: keras.Model  # stripped, with the best epoch's weights
    float_twin: Callable[[], keras.Model]  # the same weights in float32 layers (the TFLite float32 reference)
    quantization_aware: bool  # the model holds learned int8 ranges: its TFLite file is int8 whatever export asks
    cfg_tflite: TfliteConfig  # export.tflite
    train: tf.data.Dataset  # the training pipeline, batched: int8 calibration examples come from it
    serving: Any = None  # tfhydra.data.source.Serving: the data as stored -> model inputs, in the export
    output_key: str = "output_0"  # the signatures' output key, the task's (tfhydra/config/contracts.py Head)
