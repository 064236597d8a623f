"""Precision options: the Keras global dtype policy of a run (build.py: the registry, the policy scope, loss
scaling). This package's import stays TensorFlow-free; the names below are looked up on first use (PEP 562).
schemas.py: the options' types (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_NAMES = ("PRECISIONS", "policy_scope", "float32_output", "loss_scale", "warn_if_slow")


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("tfhydra.precision.build"), name)


__all__ = list(_NAMES)
