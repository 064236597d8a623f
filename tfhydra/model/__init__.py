"""Model builders: `build_x(cfg_model, spec) -> tf_keras.Model`, one registry for the group.

Input shape, dtype and class count always come from the data's `DataSpec`; no builder
hard-codes them. Every builder ends with `task_head(spec)` (head.py), the run's task's head, whose
explicit float32 activation keeps the output float32 under mixed-precision policies. A builder checks that
the data suits it (images or token ids, large enough) before it builds anything, so a
mismatch is one ConfigError line, not a shape error deep inside Keras.

This package's import stays TensorFlow-free so the run plan can read checks.py before TensorFlow is
loaded; the names below are looked up on first use (PEP 562). Rooms: base.py (the registry, the
data checks), head.py (`task_head`; a built model checked against the task's head), seed.py / resnet.py /
sequence.py / applications.py / hub.py (the builders), build.py (`build_model`, and
`model_inputs`: what the model takes from the data),
checks.py (the options' ranges and choices, `model.weights`' pre-flight), freeze.py (`model.freeze`: which layers
train), weights.py (`model.weights`: a local file loaded into the built model), memory.py (the model's memory
estimated before it is allocated).
schemas.py: the options' types (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_LAZY = {"MODELS": "tfhydra.model.build", "build_model": "tfhydra.model.build", "model_inputs": "tfhydra.model.build"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = sorted(_LAZY)
