"""Starting the experiment trackers a run's `logger` list selects (conf/logger/, docs/loggers.md).

The trackers (mlflow_run.py, wandb_run.py, trackers.py's csv) register themselves in `LOGGERS` on import;
`LOGGERS` (trackers.py, their base) names their modules and imports them on its first lookup."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from tfhydra.logger.trackers import LOGGERS, RunInfo, Trackers
from tfhydra.record.rundir import RunPaths


def start_trackers(cfg_logger: DictConfig | None, paths: RunPaths, info: RunInfo, stop: Any = None) -> Trackers:
    """The trackers `logger` selects (TensorBoard is the trainer's callback: not here), started. `stop`: the run's
    StopOnSignal, whose taken signal ends a wait on a tracker's server (trackers.py's guard)."""
    nodes = cfg_logger if isinstance(cfg_logger, DictConfig) else {}
    trackers = Trackers(
        [LOGGERS.get(name)(node, paths, info) for name, node in nodes.items() if name in LOGGERS.names()],
        paths,
        stop=stop,
    )
    return trackers.start(info.resume) if trackers.trackers else trackers
