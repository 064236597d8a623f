"""logger=wandb: a Weights & Biases run per tfhydra run, offline unless configured otherwise.

`logger.wandb.mode`, else `$WANDB_MODE`, else `offline`: a run never needs an account or the network; its
files stay in `<run>/wandb/offline-run-*` until `wandb sync` uploads them. The run's id is generated here
and kept in trackers.json before `wandb.init`, so a resumed tfhydra run continues the same W&B run
(`resume="allow"`). W&B's console capture is off: train.log and tfhydra's one-line errors stay as they are.

Every file W&B writes stays in `<run>/wandb/`: `debug.log` and `debug-internal.log` follow `dir=` (WANDB_DIR);
wandb-core's own logs (`core-debug-*.log`, `symon-debug-*.log`) and the artefact cache follow WANDB_CACHE_DIR
(else `~/.cache/wandb`); artefact staging WANDB_DATA_DIR (else `~/.local/share/wandb`); downloaded artefacts
WANDB_ARTIFACT_DIR (else `./artifacts`); and, offline, its settings WANDB_CONFIG_DIR (else `~/.config/wandb`;
online it stays the user's: `wandb login` keeps its settings there). A variable the user set is theirs and
left alone. They are set for the run only: wandb-core reads them when it starts, so the run ends with
`wandb.teardown()` (the next run of the process, a sweep's next job, starts its own core with its own dirs).
"""

from __future__ import annotations

import os
import secrets
import shutil
import string
from typing import Any

from omegaconf import DictConfig

from tfhydra.logger.schemas import WandbConfig
from tfhydra.logger.trackers import LOGGERS, RunInfo, Tracker, quiet_loggers
from tfhydra.record.run_record import Status
from tfhydra.record.rundir import RunPaths

# W&B's variables for where it writes -> the folder of <run>/wandb/ they point at, when the user set none.
WANDB_DIRS = {
    "WANDB_CACHE_DIR": "cache",
    "WANDB_DATA_DIR": "data",
    "WANDB_ARTIFACT_DIR": "artifacts",
    "WANDB_CONFIG_DIR": "config",
}


class WandbTracker(Tracker):
    name = "wandb"

    def __init__(self, node: DictConfig, paths: RunPaths, info: RunInfo) -> None:
        self.node, self.paths, self.info = node, paths, info
        self.run: Any = None  # wandb's Run once started: wandb (an optional extra) is imported then
        self.environment: dict[str, str | None] = {}  # what the variables set for the run were before

    def quiet(self):
        return quiet_loggers(("wandb",))  # W&B's Python logger: the guard's one warning says what failed

    def start(self, saved: dict) -> dict:
        import wandb

        mode = self.node.get("mode") or os.environ.get("WANDB_MODE") or "offline"
        run_id = saved.get("id") or new_id()
        self.paths.root.mkdir(parents=True, exist_ok=True)
        tags = [str(t) for t in (self.node.get("tags") or [])]
        self.environment = set_directories(self.paths.wandb, online=mode == "online")
        try:
            self.run = self.init(wandb, mode, run_id, tags)
        except BaseException:
            restore(self.environment)
            raise
        self.run.summary.update({k: v for k, v in self.info.tags.items() if v is not None})
        return {"id": run_id, "mode": mode, "logged": saved.get("logged", 0)}

    def init(self, wandb, mode: str, run_id: str, tags: list[str]):
        """wandb.init; `dir` is the run's directory unless the user's WANDB_DIR says where W&B's files go."""
        return wandb.init(
            project=self.node.get("project") or "tfhydra",
            entity=self.node.get("entity"),
            group=self.node.get("group") or self.info.sweep,
            job_type=self.node.get("job_type") or "train",
            tags=tags or None,
            name=self.info.name,
            id=run_id,
            resume="allow",
            mode=mode,
            dir=None if os.environ.get("WANDB_DIR") else str(self.paths.wandb.parent),
            config=self.info.config,
            settings=wandb.Settings(console="off", silent=True),
        )

    def log_epoch(self, epoch: int, values: dict) -> None:
        self.run.log({**values, "epoch": epoch}, step=epoch)

    def end(self, status: str, paths: RunPaths) -> None:
        self.run.summary["status"] = status
        if paths.metrics.is_file():  # files in the run's own directory are W&B's files of the run (synced with it)
            shutil.copy(paths.metrics, self.run.dir)
        try:
            self.run.finish(exit_code=0 if Status(status).succeeded else 1)
            import wandb

            wandb.teardown()  # its core process read this run's directories: the next run starts its own
        finally:
            restore(self.environment)


def set_directories(wandb_dir, online: bool) -> dict[str, str | None]:
    """WANDB_DIRS pointed into `wandb_dir` (<run>/wandb), each one the user has not set; returns what they were
    (None: unset), for `restore`. Online, WANDB_CONFIG_DIR is left: it holds the user's `wandb login` settings."""
    before = {}
    for name, folder in WANDB_DIRS.items():
        if os.environ.get(name) or (online and name == "WANDB_CONFIG_DIR"):
            continue
        before[name] = os.environ.get(name)
        os.environ[name] = str(wandb_dir / folder)
    return before


def restore(before: dict[str, str | None]) -> None:
    """The variables `set_directories` set put back as they were: a later run of the process (a sweep's next
    job) points them at its own directory, and the user's environment is as they left it."""
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    before.clear()


def new_id() -> str:
    """A W&B run id (8 lower-case letters and digits, as W&B makes them), chosen here so it is kept before init."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


@LOGGERS.register("wandb", schema=WandbConfig)
def build_wandb(node: DictConfig, paths: RunPaths, info: RunInfo) -> Tracker:
    return WandbTracker(node, paths, info)
