"""The TensorFlow Model Optimization Toolkit's API namespaces, imported on first use: the schemes (schemes.py) and
the fixed output layers they keep (outputs.py) reach tfmot through them only."""

from __future__ import annotations

import importlib


class _LazyApi:
    """A tfmot API namespace imported on first use: importing tfmot costs about 1.5 s of start-up,
    which a run without compression should not pay (docs/performance.md)."""

    def __init__(self, path: str):
        self._path = path

    def __getattr__(self, name: str):
        namespace = importlib.import_module("tensorflow_model_optimization")
        for part in self._path.split("."):
            namespace = getattr(namespace, part)
        return getattr(namespace, name)


sparsity_api, clustering_api = _LazyApi("sparsity.keras"), _LazyApi("clustering.keras")
quantization_api, combine = _LazyApi("quantization.keras"), _LazyApi("experimental.combine")
