"""Training loops `loop(cfg_trainer, model, datasets, callbacks, context)`, selected by `trainer.loop`.

Rooms: checks.py (what the run plan checks in the trainer section, no TensorFlow), loops.py
(the fit loop and the loop registry), custom.py (the tf.function loop), callbacks.py, objectives.py
(loss and metrics), state.py (resumable state and signals).

This package's import stays TensorFlow-free so the run plan can read checks.py before TensorFlow
is loaded; the names below are looked up on first use (PEP 562).
"""
from __future__ import annotations

import importlib

_LAZY = {"LOOPS": "tfhydra.trainer.loops", "LoopContext": "tfhydra.trainer.loops", "train": "tfhydra.trainer.loops"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = sorted(_LAZY)
