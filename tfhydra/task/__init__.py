"""The task room: what kind of problem a run trains (`task=classification|binary|multilabel|regression`, or a
user's own by `_target_`), answered by one `Task` object that the data, the head, the loss and metrics (through
conf/task/'s defaults), the splits, the record, predict and evaluate ask. No other room tests a task's name.

Rooms: base.py (the `Task` type, its registry `TASKS` and the label kinds found in a column or array),
classification.py, binary.py, multilabel.py, regression.py (one task each, imported by `TASKS` on its first lookup),
build.py (`build_task`, `task_of_record`), checks.py (what the run plan checks, no TensorFlow), metrics.py (metrics
the tasks' defaults name: the multi-label AUC over the labels a split defines; imports TensorFlow), ranking.py (the
exact ROC AUC in NumPy, which binary's test figure and multi-label's per-label figures take).

This face names nothing: `from tfhydra.task.build import build_task, task_of_record`,
`from tfhydra.task.base import TASKS, Task`.
schemas.py: the options' types (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
