"""Optimizer builders `build_x(cfg_optimizer, learning_rate, **clipping)` and learning-rate schedules.

Rooms: checks.py (what the run plan checks, no TensorFlow), build.py (the registries and builders), accumulate.py
(trainer.accumulate_steps: N batches per update).
This package's import stays TensorFlow-free; the names below are looked up on first use (PEP 562).
schemas.py: the options' types (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_NAMES = ("OPTIMIZERS", "SCHEDULES", "build_optimizer", "build_schedule", "plateau_callback")


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("tfhydra.optimizer.build"), name)


__all__ = list(_NAMES)
