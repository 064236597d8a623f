"""logger=wandb: a Weights & Biases run per tfhydra run, offline unless configured otherwise.

`logger.wandb.mode`, else `$WANDB_MODE`, else `offline`: a run never needs an account or the network; its
files stay in `<run>/wandb/offline-run-*` until `wandb sync` uploads them. The run's id is generated here
and kept in trackers.json before `wandb.init`, so a resumed tfhydra run continues the same W&B run
(`resume="allow"`). W&B's console capture is off: train.log and tfhydra's one-line errors stay as they are.
"""
from __future__ import annotations

import os
import secrets
import shutil
import string

from omegaconf import DictConfig

from tfhydra.logger.trackers import LOGGERS, RunInfo, Tracker
from tfhydra.rundir import RunPaths


class WandbTracker(Tracker):
    name = "wandb"

    def __init__(self, node: DictConfig, paths: RunPaths, info: RunInfo) -> None:
        self.node, self.paths, self.info = node, paths, info
        self.run = None

    def start(self, saved: dict) -> dict:
        import wandb

        mode = self.node.get("mode") or os.environ.get("WANDB_MODE") or "offline"
        run_id = saved.get("id") or new_id()
        self.paths.root.mkdir(parents=True, exist_ok=True)
        tags = [str(t) for t in (self.node.get("tags") or [])]
        self.run = wandb.init(
            project=self.node.get("project") or "tfhydra", entity=self.node.get("entity"),
            group=self.node.get("group") or self.info.sweep, job_type=self.node.get("job_type") or "train",
            tags=tags or None, name=self.info.name, id=run_id, resume="allow", mode=mode,
            dir=str(self.paths.wandb.parent), config=self.info.config,
            settings=wandb.Settings(console="off", silent=True))
        self.run.summary.update({k: v for k, v in self.info.tags.items() if v is not None})
        return {"id": run_id, "mode": mode, "logged": saved.get("logged", 0)}

    def log_epoch(self, epoch: int, values: dict) -> None:
        self.run.log({**values, "epoch": epoch}, step=epoch)

    def end(self, status: str, paths: RunPaths) -> None:
        self.run.summary["status"] = status
        if paths.metrics.is_file():  # files in the run's own directory are W&B's files of the run (synced with it)
            shutil.copy(paths.metrics, self.run.dir)
        self.run.finish(exit_code=0 if status in ("completed", "pruned") else 1)


def new_id() -> str:
    """A W&B run id (8 lower-case letters and digits, as W&B makes them), chosen here so it is kept before init."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


@LOGGERS.register("wandb")
def build_wandb(node: DictConfig, paths: RunPaths, info: RunInfo) -> Tracker:
    return WandbTracker(node, paths, info)
