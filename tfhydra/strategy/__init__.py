"""Distribution strategy builders: `build_x(cfg_strategy) -> tf.distribute.Strategy`.

Rooms: checks.py (what the run plan checks, no TensorFlow), build.py (the registry and builders).
This package's import stays TensorFlow-free; the names below are looked up on first use (PEP 562).
schemas.py: the options' types (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_NAMES = ("STRATEGIES", "build_strategy", "describe_devices", "is_chief", "shard", "read_tf_config")


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("tfhydra.strategy.build"), name)


__all__ = list(_NAMES)
