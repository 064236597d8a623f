"""`build_task`: the registered task of `task.name` (or the user's `_target_`), checked to be a `Task`; and
`task_of_record`, the task a finished run's record names, for predict and evaluate. The tasks register themselves in
`TASKS` (task/base.py), which imports their modules on its first lookup."""

from __future__ import annotations

from tfhydra.config.errors import ConfigError
from tfhydra.task.base import TASKS, Task

__all__ = ["TASKS", "Task", "build_task", "task_of_record"]


def build_task(cfg_task) -> Task:
    task = TASKS.build(cfg_task)
    if not isinstance(task, Task):
        raise ConfigError(
            "task",
            cfg_task.get("_target_", cfg_task.get("name")),
            "a builder returning a tfhydra.task.base.Task",
            f"the builder returned {type(task).__name__}",
        )
    return task


def task_of_record(section: dict | None) -> Task:
    """The task of a run's record (`task`: name and options); a run recorded before tasks is a classification,
    and a user's own task (not registered here) writes its model's raw outputs."""
    from omegaconf import OmegaConf

    section = dict(section or {"name": "classification"})
    name = str(section.pop("name", "classification"))
    options: dict = {}  # a record is read back as plain values (tfhydra/trust/): a bad one is left out
    threshold = section.get("threshold")
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        options["threshold"] = threshold
    if isinstance(section.get("standardize"), bool):
        options["standardize"] = section["standardize"]
    if name not in TASKS.names():
        return Task(name=name, **options)
    return TASKS.get(name)(OmegaConf.create({"name": name, **options}))
