"""The run record: `metrics.json`, typed and versioned. This module is its only writer and reader.

Rooms return their section (devices, data spec, training figures, exports); the orchestrator
(tfhydra/runner/job.py) puts it in with `RunRecord.update` and writes the record at every way a run ends:
completed, diverged, failed (a failure during export included) and interrupted (a signal during
export included). Readers (the sweep summary, tfhydra/trust/readers.py for evaluate and `compression.from_run`, the
resume checks, the tests) go through `read_record` / `run_status`. docs/record.md lists every field; a test
checks that list against this type.

`schema_version` says which fields a record has. A record without one was written by a tfhydra
before the record was typed (version 0): it reads, with the fields it lacks left at their
defaults. A record from a newer tfhydra (a higher version) is refused rather than misread.

Where a result came from (`versions`, `git`, `host`, `command`) is filled in when the run starts.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import platform
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfhydra.config.bounded import load_json_bounded, read_text_bounded
from tfhydra.record.headline import rounded as rounded  # the face hands it on (readers import it from there)
from tfhydra.record.headline import summary_block, test_name
from tfhydra.record.report import write_json
from tfhydra.record.rundir import RunPaths

SCHEMA_VERSION = 3
# Version 3 added `keras` (the run's Keras, keras=2|3). Version 2 added the test split: `test`, and
# `data.test_size`. A record of an earlier version than 2 has no test figures (its run validated on what is now
# the test split of some sources); readers say so (`before_test_split`).
TEST_SPLIT_VERSION = 2


class Status(str, enum.Enum):
    """How a run, a phase or a sweep job stands: the one word its record (and the sweep summary) says.

    A `str`, so records keep plain JSON and `record.status == Status.COMPLETED` reads either. What each
    means elsewhere is said here once: `succeeded` (a sweep's ranking and exit code, trackers), `finished`
    (the run ended by itself: not running, not lost), `tracker` (MLflow's run status; W&B's exit code
    follows `succeeded`), `hparams` (TensorBoard HParams' session status)."""

    RUNNING = "running"  # being trained, or killed without a word (SIGKILL): the summary says interrupted
    COMPLETED = "completed"  # trained and exported: never overwritten
    PRUNED = "pruned"  # stopped early by a search's pruner: an answer, not a failure
    DIVERGED = "diverged"  # the loss (or the weights) became NaN/inf or passed trainer.max_loss
    FAILED = "failed"  # a mistake (ConfigError) or an error; `error` says which
    INTERRUPTED = "interrupted"  # a signal (SIGTERM, SIGINT, SIGUSR2) saved and stopped it: the same command resumes
    NOT_STARTED = "not started"  # a sweep job without a directory yet (the summary only; no record says it)

    def __str__(self) -> str:
        return self.value

    def __format__(self, format_spec: str) -> str:  # the word, as str's own formatting gives it (not Enum's)
        return self.value.__format__(format_spec)

    @property
    def succeeded(self) -> bool:
        return self in (Status.COMPLETED, Status.PRUNED)

    @property
    def finished(self) -> bool:
        return self not in (Status.RUNNING, Status.NOT_STARTED)

    @property
    def tracker(self) -> str:
        return "FINISHED" if self.succeeded else "KILLED" if self in (Status.INTERRUPTED, Status.RUNNING) else "FAILED"

    @property
    def hparams(self) -> str:
        return "success" if self is Status.COMPLETED else "unknown" if self is Status.PRUNED else "failure"


STATUSES = tuple(s.value for s in Status)
# The packages whose versions decide a result; looked up from their metadata (nothing is imported).
PACKAGES = ("tfhydra", "tensorflow", "tf-keras", "tensorflow-model-optimization", "hydra-core", "omegaconf", "numpy")


class RecordError(ValueError):
    """metrics.json exists but is not a run record this tfhydra can read."""


@dataclass
class RunRecord:
    schema_version: int = SCHEMA_VERSION
    status: Status = Status.RUNNING  # read back as one (a str, so the JSON is plain)
    error: str | None = None  # the one-line reason of a failed or interrupted run
    run_dir: str = ""
    overrides: list = field(default_factory=list)  # the command line's overrides (Hydra's task overrides)
    monitor: str = ""  # trainer.monitor
    monitor_mode: str = ""  # min | max
    # {kind: fresh|saved_state|after_training|kept, epoch, reason}: how this phase started and why
    # (tfhydra/record/resume.py); null in a record written before it was kept
    resumed: dict | None = None
    # where the result came from
    versions: dict = field(default_factory=dict)  # python and PACKAGES -> version (null: not installed)
    git: dict | None = None  # {commit, dirty} of the directory the command ran in; null outside a git checkout
    host: str = ""
    command: str = ""  # the command line the user typed (a sweep's, for a job a launcher ran elsewhere)
    scheduler: dict | None = None  # {kind: slurm|ray, job_id, ...}: the job of a cluster (platform/scheduler.py)
    # the machine and the numerics
    threads: int | None = None  # intra-op threads in effect (0: TensorFlow decides)
    worker: dict | None = (
        None  # {pid, index, job, threads: {intra_op, inter_op, data}, cuda_visible_devices, gpu_memory}
    )
    strategy: str | None = None
    replicas: int | None = None
    devices: list | None = None
    policy: str | None = None  # Keras mixed-precision policy
    keras: dict | None = None  # {major, version}: the Keras the run built and trained with (keras=2: tf_keras)
    loss_scale: float | None = None  # mixed_float16 only
    # what was trained on what
    model: str | None = None
    # {option: auto, chose, data: images|features|tokens, because}: what model=auto built; null for a named model
    model_choice: dict | None = None
    params: int | None = None
    data: dict | None = None  # {name, **DataSpec}
    task: dict | None = None  # {name, threshold | standardize}: what the outputs mean (tfhydra/task/, docs/tasks.md)
    # {freeze, frozen: [names], trained: [names], trainable_params, frozen_params, statistics_params}: which trained
    layers: dict | None = None
    effective_batch_size: int | None = None  # data.batch_size x trainer.accumulate_steps: the examples of one update
    # training
    epochs_run: int = 0
    best: dict | None = (
        None  # {epoch, **logs} of the best epoch by `monitor` (exported, unless `exported` says otherwise)
    )
    exported: dict | None = None  # {epoch, weights, reason}: the epoch whose weights were exported, and from which file
    # {split, examples, metrics, weights: {epoch, file, ema, compression}}: the exported weights measured once on
    # the test split after training (nothing chose on it); null: no test split, or the run did not complete
    test: dict | None = None
    final: dict | None = None  # {epoch, **logs} of the last epoch
    history: list = field(default_factory=list)  # logs of every epoch
    val_every_steps: int | None = None  # trainer.val_every_steps: validation every N optimizer steps (null: epochs)
    validations: list = field(default_factory=list)  # {epoch, step, val_...} of each validation (val_every_steps)
    diverged: dict | None = None  # {epoch, step, loss} where training stopped as diverged (+ op, where, input, code)
    recoveries: list = field(default_factory=list)  # {epoch, step, loss, lr} of each blow-up trainer.recovery undid
    examples_per_second: float | None = None
    train_seconds_per_epoch: list = field(default_factory=list)
    stop_reason: str | None = (
        None  # epochs | patience | time | target: why training ended (tfhydra/trainer/stopping.py)
    )
    time_to_target_seconds: float | None = None  # from the command's start to the epoch reaching trainer.stop_at
    time_to_first_step_seconds: float | None = None  # from the command's start (startup.origin says which)
    startup: dict | None = None  # origin, seconds, and the parts that add up to them (tfhydra/platform/startclock.py)
    first_step_unix_time: float | None = None
    # deployment
    exports: dict | None = None  # {format: path relative to the run}
    compression: dict | None = None  # figures measured on the exported artefacts
    # a run of several phases (recipe=finetune, compression.start_epoch, prune_quantize): each phase in order, this
    # one last, {index, label, run_dir, epochs, best, layers, lr}; null for a run of one phase
    phases: list | None = None
    wall_seconds: float | None = None

    def update(self, **section: Any) -> RunRecord:
        """Put a room's section in; a key that is not a field is a programming error, not a new field."""
        unknown = set(section) - FIELDS
        if unknown:
            raise TypeError(f"not fields of the run record: {', '.join(sorted(unknown))}")
        for key, value in section.items():
            setattr(self, key, value)
        return self

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def write(self, run_dir: str | Path) -> None:
        """Replace metrics.json whole (a reader sees the old record or the new one, never half). Written with
        every field of this version, so a record read from an older version is written back as this one; the
        `summary` block goes first (derived, never read back)."""
        self.schema_version = SCHEMA_VERSION
        write_json(RunPaths(Path(run_dir)).metrics, {"summary": self.summary(), **self.as_dict()})

    def summary(self) -> dict:
        """What a reader opens metrics.json for, first and rounded to 4 significant digits: how the run ended,
        its best epoch by the monitored metric (validation: what chose it) and the test figures of the kept
        weights, the task's headline figures first (tfhydra/record/headline.py). The full-precision figures are the
        fields below it."""
        return summary_block(self)

    @property
    def best_monitored(self) -> float | None:
        return (self.best or {}).get(self.monitor)

    @property
    def before_test_split(self) -> bool:
        """Written by a tfhydra before the three splits (schema_version < 2): no test figures to show."""
        return self.schema_version < TEST_SPLIT_VERSION

    def test_metric(self, metric: str) -> float | None:
        """The test figure of a validation metric (`val_accuracy` -> the test block's `accuracy`); None without."""
        value = ((self.test or {}).get("metrics") or {}).get(test_name(metric))
        return None if value is None else float(value)


FIELDS = frozenset(f.name for f in dataclasses.fields(RunRecord))


def read_record(run_dir: str | Path) -> RunRecord | None:
    """The record in `run_dir`; None when there is none or it cannot be read (see `load_record`)."""
    try:
        return load_record(run_dir)
    except (OSError, RecordError):
        return None


def load_record(run_dir: str | Path) -> RunRecord:
    """The record in `run_dir`; OSError when there is none, RecordError when it is not one this tfhydra reads."""
    path = RunPaths(Path(run_dir)).metrics
    try:
        payload = load_json_bounded(read_text_bounded(path))
    except ValueError as error:
        raise RecordError(f"{path}: not JSON ({error})") from None
    if not isinstance(payload, dict):
        raise RecordError(f"{path}: not a JSON object")
    version = payload.get("schema_version", 0)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise RecordError(f"{path}: schema_version {version!r} (this tfhydra reads up to {SCHEMA_VERSION})")
    known = {k: v for k, v in payload.items() if k in FIELDS}
    record = RunRecord(**{**known, "schema_version": version})
    if record.status not in STATUSES or record.status == Status.NOT_STARTED:
        raise RecordError(f"{path}: status {record.status!r} is not one of {', '.join(STATUSES[:-1])}")
    record.status = Status(record.status)
    return record


def run_status(run_dir: str | Path) -> Status | None:
    """The `status` of a run's record; None when it has none or it cannot be read."""
    record = read_record(run_dir)
    return record.status if record is not None else None


# ---- where a result came from ------------------------------------------------------------------


def provenance(cwd: str | Path | None = None) -> dict:
    """{versions, git, host, command, scheduler} for the record: looked up once per job, in milliseconds."""
    from importlib import metadata

    from tfhydra.platform.command import user_command
    from tfhydra.platform.scheduler import scheduler

    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "versions": versions,
        "git": git_state(Path(cwd or os.getcwd())),
        "host": socket.gethostname(),
        "command": user_command(),
        "scheduler": scheduler(),
    }


def git_state(directory: Path) -> dict | None:
    """{commit, dirty} of the git checkout holding `directory`; None outside one (or without git).

    `dirty` counts staged and unstaged changes to tracked files and untracked files git does not
    ignore: a new, uncommitted `mymodels.py` changes what a run means as much as an edited one.
    """

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(directory), *args],
                capture_output=True,
                text=True,
                timeout=10,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}
