"""The task room: what kind of problem a run trains (`task=classification|binary|multilabel|regression`, or a
user's own by `_target_`), answered by one `Task` object that the data, the head, the loss and metrics (through
conf/task/'s defaults), the splits, the record, predict and evaluate ask. No other room tests a task's name.

Rooms: base.py (the `Task` type, its registry and the label kinds found in a column or array), classification.py,
binary.py, multilabel.py, regression.py (one task each), build.py (`build_task`), checks.py (what the run plan
checks, no TensorFlow). This package's import stays TensorFlow-free; the names below are looked up on first use.
schemas.py: the options' types (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_LAZY = {"TASKS": "tfhydra.task.build", "build_task": "tfhydra.task.build", "task_of_record": "tfhydra.task.build"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = sorted(_LAZY)
