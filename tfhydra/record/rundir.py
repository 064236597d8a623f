"""The one map of a run directory and of a sweep directory: every path tfhydra writes or reads inside them.

No other module spells a path inside a run (`"checkpoints" / "best.weights.h5"`, `"metrics.json"`):
they ask `RunPaths(run_dir)` or `SweepPaths(sweep_dir)`. The layout (docs/record.md, "The run directory"):

    <run>/  .hydra/{config,overrides,hydra}.yaml  train.log  metrics.json
            tensorboard/{train,validation}/   checkpoints/{best,last}.weights.h5  checkpoints/history.json
            checkpoints/state/  (resumable state, deleted once metrics.json is final)
            export/<format>     phases/<index>_<label>/  (earlier phases: each a run of its own)
            evaluations/<data>_<stamp>.json
            trackers.json  metrics.csv  wandb/   (the experiment trackers of logger=[...]: docs/loggers.md)
            .tfhydra.lock  (one writer at a time: tfhydra/trust/locks.py)
    <sweep>/ .tfhydra.lock  multirun.yaml  summary.{csv,md,png}  trusted.log  events.out.tfevents.* (HParams)
             trackers.json  <n>_<overrides>/ (a run each)
             screen/<n>_<overrides>/  promote/<n>_<overrides>/  (a staged sweep's jobs: sweep.promote)

Nothing here imports TensorFlow or another tfhydra room.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tfhydra.config.errors import ConfigError

LOCK_FILE = (
    ".tfhydra.lock"  # in a run and in a sweep directory: whoever writes it holds its flock (tfhydra/trust/locks.py)
)


@dataclass(frozen=True)
class RunPaths:
    root: Path
    # A multi-worker job's non-chief worker trains in a scratch root but keeps checkpoints/ (its resumable state,
    # history and weights) in its own run directory, so that it resumes with the chief (tfhydra/runner/job.py).
    checkpoints_root: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # Hydra's record of how the run was composed (written by Hydra, or by tfhydra for a run started from Python)
    @property
    def hydra(self) -> Path:
        return self.root / ".hydra"

    @property
    def config(self) -> Path:
        return self.hydra / "config.yaml"

    @property
    def overrides(self) -> Path:
        return self.hydra / "overrides.yaml"

    @property
    def hydra_config(self) -> Path:
        return self.hydra / "hydra.yaml"

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def train_log(self) -> Path:
        return self.root / "train.log"

    @property
    def metrics(self) -> Path:
        """The run record (tfhydra/record/run_record.py is its only reader and writer)."""
        return self.root / "metrics.json"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tensorboard"

    @property
    def tensorboard_train(self) -> Path:
        return self.tensorboard / "train"

    @property
    def tensorboard_validation(self) -> Path:
        return self.tensorboard / "validation"

    @property
    def tensorboard_compression(self) -> Path:
        """A compression scheme's own summaries (pruning: sparsity per layer)."""
        return self.tensorboard / "pruning"

    @property
    def checkpoints(self) -> Path:
        return Path(self.checkpoints_root or self.root) / "checkpoints"

    @property
    def best_weights(self) -> Path:
        return self.checkpoints / "best.weights.h5"

    @property
    def last_weights(self) -> Path:
        return self.checkpoints / "last.weights.h5"

    @property
    def history(self) -> Path:
        """Epochs recorded so far (what a resumed run continues from; the sweep summary of a running job)."""
        return self.checkpoints / "history.json"

    @property
    def state(self) -> Path:
        """Where a loop keeps the state it resumes from (deleted once the run's record is final)."""
        return self.checkpoints / "state"

    @property
    def export(self) -> Path:
        return self.root / "export"

    def export_format(self, name: str) -> Path:
        """`export.formats` entry `name` (saved_model, keras, tflite, onnx): a directory under export/."""
        return self.export / name

    @property
    def saved_model(self) -> Path:
        return self.export_format("saved_model")

    @property
    def serving(self) -> Path:
        """TF Serving's model base path: `serving/<version>/` is the SavedModel (tfhydra/export/)."""
        return self.export / "serving"

    @property
    def phases(self) -> Path:
        return self.root / "phases"

    def phase(self, directory: str) -> RunPaths:
        """An earlier phase's run (`directory` from its PhasePlan, e.g. phases/0_pretrain)."""
        return RunPaths(self.root / directory)

    def is_earlier_phase(self, other: str | Path) -> bool:
        """`other` is an earlier phase of the run this directory belongs to: `<run>/phases/<i>_<label>`, where this
        is `<run>` itself or another of its phases (tfhydra/runner/job.py chains them so). A non-chief worker's
        scratch root answers as its run directory (`checkpoints_root`), so every worker of a cluster answers alike."""
        parent = Path(other).resolve().parent
        here = Path(self.checkpoints_root or self.root).resolve()
        return parent.name == "phases" and parent in (here / "phases", here.parent)

    @property
    def evaluations(self) -> Path:
        return self.root / "evaluations"

    @property
    def trackers(self) -> Path:
        """The run's experiment-tracker runs (MLflow run id, W&B id ...): what a resumed run continues."""
        return self.root / "trackers.json"

    @property
    def metrics_csv(self) -> Path:
        """logger=csv: one row per epoch."""
        return self.root / "metrics.csv"

    @property
    def wandb(self) -> Path:
        """logger=wandb: W&B's own directory (wandb.init(dir=<run>) makes it; offline runs stay in it)."""
        return self.root / "wandb"

    def relative(self, path: Path) -> str:
        return str(Path(path).relative_to(self.root))


def phase_directory(index: int, label: str) -> str:
    """Relative directory of an earlier phase: `phases/<index>_<label>`."""
    return f"phases/{index}_{label}"


STAGES = ("screen", "promote")  # a staged sweep's stages, in order: each a folder of the sweep directory


@dataclass(frozen=True)
class SweepPaths:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def multirun(self) -> Path:
        """Hydra's record of the sweep's command (its overrides and sweeper settings)."""
        return self.root / "multirun.yaml"

    @property
    def lock(self) -> Path:
        return self.root / LOCK_FILE

    @property
    def summary_csv(self) -> Path:
        return self.root / "summary.csv"

    @property
    def trusted_log(self) -> Path:
        """One line per `tfhydra-sweep resume --trust-sweep`: when the gate was lifted, and the command it ran."""
        return self.root / "trusted.log"

    @property
    def summary_md(self) -> Path:
        return self.root / "summary.md"

    @property
    def summary_png(self) -> Path:
        return self.root / "summary.png"

    @property
    def optuna_db(self) -> Path:
        """tfhydra's Optuna search keeps its study here (SQLite), so a re-run continues it."""
        return self.root / "optuna.db"

    @property
    def trackers(self) -> Path:
        """The sweep's parent run in the experiment trackers (logger=mlflow): a resumed sweep continues it."""
        return self.root / "trackers.json"

    @property
    def hparams(self) -> Path:
        """The sweep's HParams experiment lives in the sweep directory itself, above the jobs' runs."""
        return self.root

    def job(self, name: str) -> RunPaths:
        return RunPaths(self.root / name)

    def stage(self, name: str) -> Path:
        """The folder of a staged sweep's stage (`screen`, `promote`: STAGES) holding its jobs
        (tfhydra/sweep/stages.py)."""
        return self.root / name

    def jobs(self) -> list[Path]:
        """Directories of jobs that started: Hydra names them `<num>_...` (conf/tfhydra.yaml) and writes .hydra/ first;
        a job killed in between has only the directory. A staged sweep's jobs are in its stages' folders."""
        folders = [self.root, *(self.stage(s) for s in STAGES)]
        return sorted(
            d
            for folder in folders
            if folder.is_dir()
            for d in folder.iterdir()
            if d.is_dir()
            and (
                d.name.split("_", 1)[0].isdigit()
                and "_" in d.name
                or RunPaths(d).overrides.is_file()
                or RunPaths(d).metrics.is_file()
            )
        )


def check_creatable(key: str, value: str, folder: Path) -> None:
    """`folder` exists as a writable directory, or can be made: its nearest existing ancestor is one."""
    existing = folder.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(
            key,
            value,
            "a path below a directory, with no regular file on the way",
            f"cannot create {folder}: {existing} is a file, not a directory",
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(
            key,
            value,
            "a path in a directory you can write to",
            f"cannot create {folder}: no write permission in {existing}",
        )


def contained(path: Path, root: Path) -> Path:
    """`path`, after checking that writing it stays in `root`: a link on the way that leaves the directory (an
    `evaluations/` that points at /etc in a directory someone shared) is one ConfigError, written to nowhere."""
    real = Path(path).resolve()
    if not real.is_relative_to(Path(root).resolve()):
        raise ConfigError(
            str(path),
            None,
            f"a path inside {root}",
            f"it links out of the directory (to {real}); "
            "tfhydra writes nothing outside a run or sweep directory it was given",
        )
    return Path(path)
