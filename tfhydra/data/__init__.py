"""Data sources and the one tf.data pipeline every source goes through.

A source is a registered builder `build_x(cfg_data, seed) -> Source`: two unbatched
datasets plus the `DataSpec` that model builders read (no model hard-codes a shape or a
class count). `build_datasets` applies the shared pipeline options of the `data:` section.

Rooms: source.py (the types builders share), pipeline.py (build_datasets), augment.py,
and one module per family of sources: arrays.py (digits, synthetic, npz),
keras_datasets.py (mnist, fashion_mnist, cifar10, cifar100), files.py (image_folder; image_labels.py its labels),
tfrecord.py, tfds_source.py (tfds), tables.py (csv, text_csv); labels.py (how the run's task reads, splits and subsets
the labels: tfhydra/task/); inputs.py (what the model takes: prepared examples or raw text); splits.py
(training, validation and test held apart); caching.py, budget.py, file_cache.py, index.py, image_headers.py,
service.py, service_watch.py (what the pipeline decides and reads, and the tf.data service's watchdog); checks.py
holds what the run plan checks, label_sample.py the labels it reads for the task to judge (no TensorFlow).

This package's import stays TensorFlow-free so the run plan can read checks.py before TensorFlow is
loaded; the names below are looked up on first use (PEP 562), which also registers every source.
schemas.py: the options' types (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_LAZY = {
    "DATA": "source",
    "DataSpec": "source",
    "Source": "source",
    "source_from_arrays": "source",
    "stratified_split": "source",
    "Datasets": "pipeline",
    "build_datasets": "pipeline",
    "limit_steps": "pipeline",
    "Reads": "caching",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for family in ("arrays", "files", "keras_datasets", "tables", "tfrecord", "tfds_source"):  # register the builders
        importlib.import_module(f"tfhydra.data.{family}")
    return getattr(importlib.import_module(f"tfhydra.data.{_LAZY[name]}"), name)


__all__ = sorted(_LAZY)
