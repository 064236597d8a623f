"""A sweep's jobs as they stand on disk: what each job directory and the sweep's multirun.yaml say.

Read back from each job's `metrics.json` (tfhydra/record/run_record.py), `.hydra/overrides.yaml` and `hydra.yaml`
(through the trust boundary's plain reader, tfhydra/trust/readers.py: displayed, never composed),
`checkpoints/history.json`, and the sweep's `multirun.yaml`. A job killed without a word (SIGKILL leaves a record
saying `running`, or none) is `interrupted`; a job of the recorded grid without a directory is `not started`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfhydra.config.jobnames import sweep_override_keys
from tfhydra.platform.scheduler import where
from tfhydra.record.headline import headline, headline_figures, tie_in_words
from tfhydra.record.monitor import MODES, TIE_BREAKER, Monitor, is_figure
from tfhydra.record.resume import read_history
from tfhydra.record.run_record import RunRecord, Status, read_record
from tfhydra.record.rundir import RunPaths, SweepPaths
from tfhydra.sweep.folds import FOLD, fold_overrides, folds_of
from tfhydra.sweep.kind import expands_grid
from tfhydra.trust.readers import plain_file


@dataclass
class Job:
    num: int | None
    name: str  # the job directory's name ('' when the job never started)
    overrides: list[str]  # every override of the job: what reproduces it
    status: Status
    history: list[float | None] = field(default_factory=list)  # the monitored metric per epoch
    wall_seconds: float | None = None
    error: str | None = None
    swept: list[str] = field(default_factory=list)  # the overrides that differ between jobs of the sweep
    rank: int | None = None
    monitor: str | None = None  # what the job itself monitored (its metrics.json)
    monitor_mode: str | None = None
    stage: str | None = None  # a staged sweep's job: "screen" or "promote" (its directory's folder), else None
    # The monitored metric measured once on the test split (the record's `test` block): shown, never ranked on
    test: float | None = None
    before_test_split: bool = False  # its record predates the test split (schema_version < 2): no test figure
    # The record's best (value, epoch) of `monitor`: the epoch it exported (or would have), chosen among the epochs
    # that may be exported (after pruning has reached its target); None when the record has no best block
    recorded_best: tuple[float | None, int | None] | None = None
    where: str = ""  # the cluster's job that ran it (`slurm 12_1 on node3`, tfhydra/platform/scheduler.py), or ''
    losses: list[float | None] = field(default_factory=list)  # val_loss per epoch (the record's): breaks a tie
    # The task's headline (tfhydra/record/headline.py): its names, and {`val_<name>`: the best epoch's figure,
    # `test_<name>`: the kept weights' test figure}, shown first in the summary
    headline: tuple[str, ...] = ()
    figures: dict = field(default_factory=dict)
    tie: str | None = None  # the tie among its epochs its record's best was chosen from, in words; None: none
    stop_reason: str | None = None  # why training ended: epochs | patience | time | target (trainer/stopping.py)
    time_to_target_seconds: float | None = None  # from the command's start to the epoch reaching trainer.stop_at

    def best(self, monitor: Monitor) -> tuple[float | None, int | None]:
        """(best value, its epoch from 1) of the monitored metric: the record's own choice when it made one for
        this metric; otherwise (killed before its record said, or ranked by another metric) the history's."""
        if self.recorded_best is not None and self.monitor == monitor.name:
            return self.recorded_best
        return monitor.best(self.history, losses=self.losses)

    def best_loss(self, monitor: Monitor) -> float | None:
        """The val_loss of the epoch `best` names: what breaks an exact tie between jobs (Monitor.rank_key)."""
        _, epoch = self.best(monitor)
        return self.losses[epoch - 1] if epoch is not None and 0 < epoch <= len(self.losses) else None

    @property
    def final(self) -> float | None:
        return self.history[-1] if self.history else None


@dataclass
class Group:
    """Jobs that differ only by `trainer.seed` or `data.fold` (k-fold): one setting, measured n times."""

    overrides: list[str]  # the swept overrides the jobs share (trainer.seed and data.fold left out)
    jobs: list[Job]
    values: list[float]  # best monitored value of each completed job
    rank: int | None = None
    test_values: list[float] = field(default_factory=list)  # the completed jobs' test figures (shown, not ranked on)
    over: tuple[str, ...] = ("trainer.seed",)  # the swept keys the jobs differ by

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / self.n if self.values else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation (n - 1); 0 for a single value."""
        return _sample_std(self.values)

    @property
    def test_mean(self) -> float | None:
        return sum(self.test_values) / len(self.test_values) if self.test_values else None

    @property
    def test_std(self) -> float | None:
        return _sample_std(self.test_values)

    @property
    def label(self) -> str:
        return " ".join(self.overrides) or "(no other override)"

    @property
    def over_in_words(self) -> str:
        """What its n values are of: `folds`, `seeds`, or `seeds x folds`."""
        return " x ".join({"trainer.seed": "seeds", FOLD: "folds"}.get(k, k) for k in self.over)


def _sample_std(values: list[float]) -> float | None:
    """Sample standard deviation (n - 1); 0 for a single value, None for none."""
    if not values:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0


def read_job(job_dir: Path) -> Job:
    paths = RunPaths(job_dir)
    record = read_record(job_dir) or RunRecord(status=Status.INTERRUPTED)
    overrides = plain_file(paths.overrides, job_dir)
    if not isinstance(overrides, list):
        overrides = record.overrides or []
    status = record.status
    if not status.finished:  # no record, or running: killed (SIGKILL leaves no word), or still running
        status = Status.INTERRUPTED
    error = record.error
    if status == Status.DIVERGED and not error:
        where = record.diverged or {}
        if where.get("weights"):
            return _job(
                job_dir,
                overrides,
                status,
                record,
                f"weights of {where['weights']} became NaN or infinite "
                f"by step {where.get('step')} (epoch {where.get('epoch')})",
            )
        loss = where.get("loss")
        shown = f"{loss:.4g}" if isinstance(loss, (int, float)) else "nan/inf"  # JSON keeps no NaN: null
        error = (
            f"loss became {shown} at step {where.get('step')} (epoch {where.get('epoch')})"
            if where
            else "the training loss diverged"
        )
    return _job(job_dir, overrides, status, record, error)


def read_sweep_jobs(sweep_dir: Path) -> list[Job]:
    """Every job directory of the sweep, each named by its path in the sweep (`3_...`, or `screen/3_...` in a
    staged sweep, whose `stage` says which)."""
    found = []
    for directory in SweepPaths(sweep_dir).jobs():
        job = read_job(directory)
        job.name = directory.relative_to(sweep_dir).as_posix()
        job.stage = directory.parent.name if directory.parent != Path(sweep_dir) else None
        found.append(job)
    return found


def merge_jobs(expected: list[Job], found: list[Job]) -> list[Job]:
    """The jobs the sweep's recorded command runs (`expected`: not started until a directory says otherwise), with
    the `found` directories in their place; without `expected` (no multirun.yaml, glob()), what was found."""
    planned: dict[int | str | None, Job] = {j.num: j for j in expected}
    if planned:  # the sweep's recorded command: a directory left by an earlier, other command is not one of its jobs
        found = [
            j
            for j in found
            if j.num in planned and (not j.overrides or sorted(j.overrides) == sorted(planned[j.num].overrides))
        ]
    for job in found:  # killed before Hydra wrote its .hydra/: its overrides are the grid's
        if not job.overrides and job.num in planned:
            job.overrides = planned[job.num].overrides
    merged: dict[int | str | None, Job] = {**planned, **{j.num if j.num is not None else j.name: j for j in found}}
    return list(merged.values())


def _job(job_dir: Path, overrides: list, status: Status, record: RunRecord, error: str | None) -> Job:
    best, tested = record.best if isinstance(record.best, dict) else {}, (record.test or {}).get("metrics")
    tested = tested if isinstance(tested, dict) else {}
    return Job(
        _job_number(job_dir),
        job_dir.name,
        [str(o) for o in overrides],
        status,
        wall_seconds=record.wall_seconds,
        error=error,
        monitor=record.monitor or None,
        monitor_mode=record.monitor_mode or None,
        test=record.test_metric(record.monitor),
        before_test_split=record.before_test_split and RunPaths(job_dir).metrics.is_file(),
        recorded_best=recorded_best(record),
        where=where(record.scheduler),
        losses=[e.get(TIE_BREAKER) if isinstance(e, dict) else None for e in record.history],
        headline=headline(record.task, best, tested),
        figures=headline_figures(record.task, best, tested, record.monitor),
        tie=tie_in_words(best.get("tie"), record.monitor),
        stop_reason=record.stop_reason if isinstance(record.stop_reason, str) else None,
        time_to_target_seconds=record.time_to_target_seconds if is_figure(record.time_to_target_seconds) else None,
    )


def recorded_best(record: RunRecord) -> tuple[float | None, int | None] | None:
    """(value, epoch) of the record's best block for its own monitor; (None, None) when the block names no figure
    (every epoch NaN); None when there is no block to read (a record still `running`: what a kill left)."""
    best = record.best
    if record.status == Status.RUNNING or not isinstance(best, dict) or not record.monitor:
        return None
    value, epoch = best.get(record.monitor), best.get("epoch")
    if not is_figure(value):
        return None, None
    return float(value), epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def _job_number(job_dir: Path) -> int | None:
    num = (((plain_file(RunPaths(job_dir).hydra_config, job_dir) or {}).get("hydra") or {}).get("job") or {}).get("num")
    if isinstance(num, int):
        return num
    match = re.match(r"(\d+)_", job_dir.name)
    return int(match.group(1)) if match else None


def history(job: RunPaths, monitor: str) -> list[float | None]:
    """The monitored metric per epoch: from the run record, or the per-epoch record of an unfinished job."""
    record = read_record(job.root)
    epochs = record.history if record is not None and record.status != Status.RUNNING else None
    if epochs is None:
        epochs = (read_history(job.history) or {}).get("epochs", [])
    return [e.get(monitor) if isinstance(e, dict) else None for e in epochs]


def sweep_monitor(sweep: Any, jobs: list[Job]) -> tuple[str, str]:
    """The sweep's `trainer.monitor` and mode; without multirun.yaml, what its jobs monitored."""
    trainer = (sweep.get("trainer") or {}) if isinstance(sweep, dict) else {}
    candidates = [(trainer.get("monitor"), trainer.get("monitor_mode"))] + [(j.monitor, j.monitor_mode) for j in jobs]
    for monitor, mode in candidates:
        if isinstance(monitor, str) and "${" not in monitor and mode in MODES:
            return monitor, mode
    return "val_accuracy", "max"  # conf/tfhydra.yaml's default


def expected_jobs(sweep: Any) -> list[Job]:
    """The jobs a basic sweep was going to run, from multirun.yaml: those without a directory never started."""
    if not isinstance(sweep, dict):
        return []
    hydra = sweep.get("hydra") or {}
    sweeper = hydra.get("sweeper") or {}
    if not expands_grid(sweep):
        return []
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from tfhydra.config.hydra_api import split_sweep

    arguments = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()] + list(
        (hydra.get("overrides") or {}).get("task") or []
    )
    arguments += fold_overrides(folds_of(sweep))  # k-fold: as tfhydra's sweeper added them (tfhydra/sweep/folds.py)
    try:
        batches = split_sweep(OverridesParser.create().parse_overrides(arguments))
    except Exception:  # noqa: BLE001  (glob() needs the config to expand: list the jobs that have directories only)
        return []
    jobs = [list(job) for batch in batches for job in batch]
    return [Job(i, "", overrides, Status.NOT_STARTED) for i, overrides in enumerate(jobs)]


def swept_keys_of(sweep: Any, jobs: list[Job]) -> set[str]:
    """Swept on the command line or in hydra.sweeper.params; without multirun.yaml (a search sweeper
    writes none), the keys whose values differ between jobs."""
    if isinstance(sweep, dict):
        hydra = sweep.get("hydra") or {}
        keys = sweep_override_keys((hydra.get("overrides") or {}).get("task") or [])
        keys |= {FOLD} if folds_of(sweep) else set()  # drawn by the sweeper, not typed
        return keys | set(((hydra.get("sweeper") or {}).get("params") or {}).keys())
    values = [dict(split_override(o) for o in job.overrides) for job in jobs]
    keys = {k for v in values for k in v}
    return {k for k in keys if len({v.get(k) for v in values}) > 1}


def rank_jobs(jobs: list[Job], monitor: Monitor) -> list[Job]:
    """Completed jobs with a monitored value ranked by their record's best (`rank` from 1; an exact tie by the lower
    val_loss of the best epochs, as between epochs (tfhydra/record/monitor.py), then by job number),
    then the others by job number: the summary's order, and which screen jobs a staged sweep promotes
    (tfhydra/sweep/stages.py)."""
    order = lambda j: (j.num if j.num is not None else 1 << 30, j.name)  # noqa: E731
    scored = [(v, j) for j in jobs if j.status == Status.COMPLETED and (v := j.best(monitor)[0]) is not None]
    scored.sort(key=lambda vj: (monitor.rank_key(vj[0], vj[1].best_loss(monitor)), order(vj[1])))
    ranked = [j for _, j in scored]
    for rank, job in enumerate(ranked, start=1):
        job.rank = rank
    return ranked + sorted((j for j in jobs if j.rank is None), key=order)


def key_of(override: str) -> str:
    return override.split("=", 1)[0]


def split_override(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key, value
