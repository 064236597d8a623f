"""Compression builders: `build_x(cfg_compression, model, spec, steps_per_epoch) -> Compression`.

A scheme wraps the freshly built model for training, may need callbacks during
training, and turns the trained model into the deployable one (`strip`) before export.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import tf_keras as keras

from tfhydra.registry import Registry

COMPRESSIONS = Registry("compression")


@dataclass
class Compression:
    model: keras.Model  # the model to compile and train
    callbacks: list[keras.callbacks.Callback] = field(default_factory=list)
    strip: Callable[[keras.Model], keras.Model] = lambda model: model

    def report(self, trained: keras.Model) -> dict:
        """Measured figures for metrics.json's `compression` section."""
        return {}


def compress_model(cfg_compression, model: keras.Model, spec, steps_per_epoch: int) -> Compression:
    return COMPRESSIONS.build(cfg_compression, model=model, spec=spec, steps_per_epoch=steps_per_epoch)


@COMPRESSIONS.register("none")
def build_none(cfg, model: keras.Model, spec, steps_per_epoch: int) -> Compression:
    return Compression(model)
