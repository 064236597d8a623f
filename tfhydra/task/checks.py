"""What the run plan checks in the `task:` section, before TensorFlow is imported: the ranges of its keys, and
whether the labels a source could read without TensorFlow fit the task (`check_label_sample`)."""

from __future__ import annotations

from tfhydra.config.contracts import LabelSample
from tfhydra.config.schema import Rule, integer, number, optional

RULES: dict[str, Rule] = {
    "task.threshold": number(0.0, 1.0, low_open=True, high_open=True),
    "task.standardize": Rule("true or false", lambda v: isinstance(v, bool)),
    "task.strata_bins": optional(integer(2)),
}


def check_label_sample(cfg_task, cfg_data, sample: LabelSample) -> None:
    """A label that does not fit the run's task is one line before TensorFlow (the task's `check_sample`): asked
    of tfhydra's own tasks only (a user's `_target_` task answers its labels in the job)."""
    from tfhydra.task.build import TASKS, build_task

    if cfg_task.get("_target_") or cfg_task.get("name") not in TASKS.names():
        return
    build_task(cfg_task).check_sample(sample, cfg_data)
