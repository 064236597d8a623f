"""Compression schemes: `build_x(cfg_compression, model, spec, phase) -> Compression`, one registry.

A scheme wraps the run's model with the TensorFlow Model Optimization Toolkit (tfmot) for
training, may need callbacks in both loops, and turns the trained model into the deployable
one (`strip`) before export. Rooms: plan.py (checks and phases, decided from the config alone,
no TensorFlow), schemes.py (the registry and the registered builders), toolkit.py (tfmot's API namespaces,
imported on first use), outputs.py (the fixed output layers a scheme keeps as they are), phases.py (applying the
scheme, from an earlier run's model when there is one), measure.py (figures read from the stripped weights),
checks_models.py (which scheme tfmot can apply to which built-in model, no TensorFlow).

This package's import stays TensorFlow-free so the run plan can read plan.py before TensorFlow is
loaded; the names below are looked up on first use (PEP 562).
schemas.py: the options' types (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_LAZY = {
    "Compression": "tfhydra.config.contracts",
    "Phase": "tfhydra.config.contracts",
    "COMPRESSIONS": "tfhydra.compression.schemes",
    "compress_model": "tfhydra.compression.phases",
    "build_scheme": "tfhydra.compression.schemes",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = sorted(_LAZY)
