"""The summary of a sweep: `summary.csv`, `summary.md` and `summary.png` in the sweep directory.

Everything is read back from what the jobs left on disk (each job's `metrics.json`,
`.hydra/overrides.yaml`, `checkpoints/history.json`, and the sweep's `multirun.yaml`), so
the same code summarises a sweep that just ended, one still running, and one that was
interrupted (`python -m tfhydra.sweep summary <sweep dir>`). Jobs are ranked by their best
monitored metric (`trainer.monitor`, `trainer.monitor_mode`); only completed jobs are
ranked, since a diverged or failed job exported no model.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfhydra.record import RunRecord, read_record
from tfhydra.report import atomic_path, write_atomically
from tfhydra.rundir import RunPaths, SweepPaths
from tfhydra.sweep import sweep_override_keys
from tfhydra.trust import plain_file

STATUSES = ("completed", "pruned", "diverged", "failed", "interrupted", "not started")


@dataclass
class Job:
    num: int | None
    name: str  # the job directory's name ('' when the job never started)
    overrides: list[str]  # every override of the job: what reproduces it
    status: str
    history: list[float | None] = field(default_factory=list)  # the monitored metric per epoch
    wall_seconds: float | None = None
    error: str | None = None
    swept: list[str] = field(default_factory=list)  # the overrides that differ between jobs of the sweep
    rank: int | None = None
    monitor: str | None = None  # what the job itself monitored (its metrics.json)
    monitor_mode: str | None = None

    def best(self, mode: str) -> tuple[float | None, int | None]:
        """(best value, its epoch from 1) of the monitored metric."""
        scored = [(v, i + 1) for i, v in enumerate(self.history) if v is not None and math.isfinite(v)]
        if not scored:
            return None, None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda ve: (ve[0], -ve[1]) if mode == "max" else (ve[0], ve[1]))

    @property
    def final(self) -> float | None:
        return self.history[-1] if self.history else None


@dataclass
class Group:
    """Jobs that differ only by `trainer.seed`: one setting, measured n times."""
    overrides: list[str]  # the swept overrides the jobs share (trainer.seed left out)
    jobs: list[Job]
    values: list[float]  # best monitored value of each completed job
    rank: int | None = None

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / self.n if self.values else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation (n - 1); 0 for a single value."""
        if not self.values:
            return None
        mean = self.mean
        return math.sqrt(sum((v - mean) ** 2 for v in self.values) / (self.n - 1)) if self.n > 1 else 0.0

    @property
    def label(self) -> str:
        return " ".join(self.overrides) or "(no other override)"


SEED_KEY = "trainer.seed"


def seed_groups(summary: Summary) -> list[Group]:
    """Group the jobs by their swept overrides other than trainer.seed, when trainer.seed is swept; rank the
    groups by the mean of their completed jobs' best monitored value (only groups with a completed job)."""
    if SEED_KEY not in summary.swept_keys:
        return []
    by_setting: dict[tuple[str, ...], list[Job]] = {}
    for job in sorted(summary.jobs, key=lambda j: (j.num if j.num is not None else 1 << 30, j.name)):
        setting = tuple(o for o in job.swept if _key(o).lstrip("+~") != SEED_KEY)
        by_setting.setdefault(setting, []).append(job)
    groups = []
    for setting, jobs in by_setting.items():
        values = [j.best(summary.mode)[0] for j in jobs if j.status == "completed"]
        groups.append(Group(list(setting), jobs, [v for v in values if v is not None]))
    ranked = sorted((g for g in groups if g.values), key=lambda g: -g.mean if summary.mode == "max" else g.mean)
    for rank, group in enumerate(ranked, start=1):
        group.rank = rank
    return ranked + [g for g in groups if not g.values]


@dataclass
class Summary:
    sweep_dir: Path
    monitor: str
    mode: str
    swept_keys: list[str]
    jobs: list[Job]  # ranked jobs first, best first; then the others by job number
    notes: list[str] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)  # jobs that differ only by trainer.seed; best mean first

    @property
    def best(self) -> Job | None:
        return self.jobs[0] if self.jobs and self.jobs[0].rank == 1 else None

    @property
    def unsuccessful(self) -> list[Job]:
        return [j for j in self.jobs if j.status not in ("completed", "pruned")]  # a pruned trial is a search's answer

    def counts(self) -> str:
        found = {s: sum(j.status == s for j in self.jobs) for s in STATUSES}
        return ", ".join(f"{n} {s}" for s, n in found.items() if n)

    def reproduce(self, job: Job) -> str:
        """The job as a single run: its overrides, less the Optuna trial number (which only a search reads)."""
        overrides = [o for o in job.overrides if not o.startswith(("+optuna_trial=", "optuna_trial="))]
        from tfhydra.cli import COMMAND

        return " ".join([COMMAND, *(shlex.quote(o) for o in overrides)])

    def report(self) -> str:
        """What the end of a sweep prints: the counts, the best job, how to rerun it, where the summary is."""
        lines = [f"sweep {self.sweep_dir}: {len(self.jobs)} jobs ({self.counts()})"]
        best = self.best
        if best is not None:
            value, epoch = best.best(self.mode)
            lines.append(f"best job: {best.name} ({self.monitor}={value:.4f} at epoch {epoch})")
            lines.append(f"reproduce: {self.reproduce(best)}")
        else:
            lines.append("best job: none (no job completed)")
        lines.append(f"summary: {self.sweep_dir / 'summary.md'}")
        lines += self.notes
        return "\n".join(lines)


def summarize(sweep_dir: str | Path, write: bool = True) -> Summary:
    """Read every job of the sweep in `sweep_dir`, rank them, and (by default) write the summary files."""
    sweep_dir = Path(sweep_dir)
    paths = SweepPaths(sweep_dir)
    sweep = plain_file(paths.multirun, paths.root)
    found = [_read_job(d) for d in paths.jobs()]
    monitor, mode = _monitor(sweep, found)
    expected = {j.num: j for j in _expected_jobs(sweep)}
    if expected:  # the sweep's recorded command: a directory left by an earlier, other command is not one of its jobs
        found = [j for j in found if j.num in expected
                 and (not j.overrides or sorted(j.overrides) == sorted(expected[j.num].overrides))]
    for job in found:  # killed before Hydra wrote its .hydra/: its overrides are the grid's
        if not job.overrides and job.num in expected:
            job.overrides = expected[job.num].overrides
    jobs = list({**expected, **{j.num if j.num is not None else j.name: j for j in found}}.values())
    for job in jobs:
        if job.name:
            job.history = _history(paths.job(job.name), monitor)
    keys = _swept_keys(sweep, jobs)
    for job in jobs:
        job.swept = [o for o in job.overrides if _key(o) in keys] or list(job.overrides)
    summary = Summary(sweep_dir, monitor, mode, sorted(keys), _ranked(jobs, mode))
    summary.groups = seed_groups(summary)
    if write:
        write_summary(summary)
    return summary


def write_summary(summary: Summary) -> None:
    """Each file is replaced whole (tfhydra.report): a summary rebuilt while someone reads it, or a
    sweep killed while writing it, leaves the previous file or the new one, never half of one."""
    paths = SweepPaths(summary.sweep_dir)
    write_atomically(paths.summary_csv, to_csv(summary))
    plot_note = write_plot(summary, paths.summary_png)
    if plot_note:
        summary.notes.append(plot_note)
    write_atomically(paths.summary_md, to_markdown(summary, plot=plot_note is None))


def to_csv(summary: Summary) -> str:
    monitor = summary.monitor
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    grouped = [f"group_{name}" for name in ("rank", f"mean_{monitor}", f"std_{monitor}", "n", "overrides")]
    writer.writerow(["rank", "job", "status", f"best_{monitor}", "best_epoch", f"final_{monitor}", "epochs",
                     "wall_seconds", *summary.swept_keys, "overrides", "directory", "error",
                     *(grouped if summary.groups else [])])
    group_of = {id(j): g for g in summary.groups for j in g.jobs}
    ordered = [j for g in summary.groups for j in g.jobs] if summary.groups else summary.jobs
    for job in ordered:
        best, epoch = job.best(summary.mode)
        values = dict(_split(o) for o in job.overrides)
        group = group_of.get(id(job))
        writer.writerow([_blank(job.rank), _blank(job.num), job.status, _blank(best), _blank(epoch), _blank(job.final),
                         len(job.history), _blank(job.wall_seconds and round(job.wall_seconds, 2)),
                         *(values.get(k, "") for k in summary.swept_keys), " ".join(job.swept), job.name,
                         job.error or "", *([_blank(group.rank), _blank(group.mean), _blank(group.std), group.n,
                                             group.label] if group else [])])
    return out.getvalue()


def to_markdown(summary: Summary, plot: bool) -> str:
    monitor, mode = summary.monitor, summary.mode
    lines = [f"# Sweep {summary.sweep_dir.name}", "",
             f"{len(summary.jobs)} jobs: {summary.counts()}. Ranked by the best `{monitor}` "
             f"({'higher' if mode == 'max' else 'lower'} is better); only completed jobs are ranked.", "",
             f"| rank | job | overrides | status | best {monitor} | at epoch | final {monitor} | epochs | wall time |",
             "|---:|---|---|---|---:|---:|---:|---:|---:|"]
    for job in summary.jobs:
        best, epoch = job.best(mode)
        name = f"[{_cell(job.name)}](<{job.name}/>)" if job.name else "—"
        lines.append(f"| {_blank(job.rank) or '—'} | {name} | `{_cell(' '.join(job.swept))}` | {job.status} | "
                     f"{_number(best)} | {_blank(epoch) or '—'} | {_number(job.final)} | {len(job.history)} | "
                     f"{_seconds(job.wall_seconds)} |")
    if summary.groups:
        lines += ["", f"## Settings over seeds (jobs that differ only by `{SEED_KEY}`)", "",
                  f"Ranked by the mean of the best `{monitor}` of their completed jobs; std is the sample standard "
                  "deviation.", "", f"| rank | setting | mean {monitor} | std | n | jobs |", "|---:|---|---:|---:|---:|---|"]
        for group in summary.groups:
            lines.append(f"| {_blank(group.rank) or '—'} | `{_cell(group.label)}` | {_number(group.mean)} | "
                         f"{_number(group.std)} | {group.n} | {', '.join(_cell(j.name or str(j.num)) for j in group.jobs)} |")
    best = summary.best
    if best is not None:
        lines += ["", f"Best job: `{best.name}`. Reproduce it with:", "", "```bash", summary.reproduce(best), "```"]
    problems = [j for j in summary.jobs if j.error]
    if problems:
        lines += ["", "## Jobs that did not complete", ""]
        lines += [f"- `{j.name or j.num}` ({j.status}): {j.error}" for j in problems]
    if plot:
        lines += ["", f"![{monitor} per epoch](summary.png)"]
    lines += [""] + summary.notes if summary.notes else []
    return "\n".join(lines) + "\n"


def write_plot(summary: Summary, path: Path) -> str | None:
    """The monitored metric per epoch for every job; returns a note instead when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: files only
        import matplotlib.pyplot as plt
    except ImportError:
        path.unlink(missing_ok=True)  # an older plot would no longer match the tables
        return "summary.png skipped: matplotlib is not installed (pip install 'tfhydra[sweeps]')"
    figure, axes = plt.subplots(figsize=(8, 5))
    if summary.groups:  # one line per setting: the mean over its seeds, and a band of one standard deviation
        for group in summary.groups:
            histories = [j.history for j in group.jobs if j.status == "completed" and j.history]
            epochs = range(1, min(map(len, histories)) + 1) if histories else []
            means, stds = [], []
            for epoch in epochs:
                values = [h[epoch - 1] for h in histories if h[epoch - 1] is not None]
                mean = sum(values) / len(values) if values else math.nan
                means.append(mean)
                stds.append(math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
                            if len(values) > 1 else 0.0)
            if means:
                line, = axes.plot(list(epochs), means, marker="o", label=f"{group.label} (n={len(histories)})")
                axes.fill_between(list(epochs), [m - s for m, s in zip(means, stds)],
                                  [m + s for m, s in zip(means, stds)], color=line.get_color(), alpha=0.2)
    for job in ([] if summary.groups else summary.jobs):
        points = [(i + 1, v) for i, v in enumerate(job.history) if v is not None]
        if points:
            epochs, values = zip(*points, strict=True)
            axes.plot(epochs, values, marker="o", label=f"{job.name} ({job.status})")
    axes.set_xlabel("epoch")
    axes.set_ylabel(summary.monitor)
    axes.set_title(f"{summary.monitor} per epoch: {summary.sweep_dir.name}")
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize="small")
    try:
        with atomic_path(path) as partial:
            figure.savefig(partial, format="png", dpi=100, bbox_inches="tight")
    finally:
        plt.close(figure)
    return None


# ---- reading a sweep directory -------------------------------------------------------------

def _read_job(job_dir: Path) -> Job:
    paths = RunPaths(job_dir)
    record = read_record(job_dir) or RunRecord(status="interrupted")
    overrides = plain_file(paths.overrides, job_dir)
    if not isinstance(overrides, list):
        overrides = record.overrides or []
    status = record.status
    if status not in STATUSES:  # no record, or "running": killed (SIGKILL leaves no word), or still running
        status = "interrupted"
    error = record.error
    if status == "diverged" and not error:
        where = record.diverged or {}
        if where.get("weights"):
            return _job(job_dir, overrides, status, record, f"weights of {where['weights']} became NaN or infinite "
                        f"by step {where.get('step')} (epoch {where.get('epoch')})")
        loss = where.get("loss")
        shown = f"{loss:.4g}" if isinstance(loss, (int, float)) else "nan/inf"  # JSON keeps no NaN: null
        error = f"loss became {shown} at step {where.get('step')} (epoch {where.get('epoch')})" if where else \
            "the training loss diverged"
    return _job(job_dir, overrides, status, record, error)


def _job(job_dir: Path, overrides: list, status: str, record: RunRecord, error: str | None) -> Job:
    return Job(_job_number(job_dir), job_dir.name, [str(o) for o in overrides], status,
               wall_seconds=record.wall_seconds, error=error, monitor=record.monitor or None,
               monitor_mode=record.monitor_mode or None)


def _job_number(job_dir: Path) -> int | None:
    num = (((plain_file(RunPaths(job_dir).hydra_config, job_dir) or {}).get("hydra") or {}).get("job") or {}).get("num")
    if isinstance(num, int):
        return num
    match = re.match(r"(\d+)_", job_dir.name)
    return int(match.group(1)) if match else None


def _history(job: RunPaths, monitor: str) -> list[float | None]:
    """The monitored metric per epoch: from the run record, or the per-epoch record of an unfinished job."""
    record = read_record(job.root)
    epochs = record.history if record is not None and record.status != "running" else None
    if epochs is None:
        epochs = _read_json(job.history).get("epochs", [])
    return [e.get(monitor) if isinstance(e, dict) else None for e in epochs]


def _monitor(sweep: Any, jobs: list[Job]) -> tuple[str, str]:
    """The sweep's `trainer.monitor` and mode; without multirun.yaml, what its jobs monitored."""
    trainer = (sweep.get("trainer") or {}) if isinstance(sweep, dict) else {}
    candidates = [(trainer.get("monitor"), trainer.get("monitor_mode"))] + [(j.monitor, j.monitor_mode) for j in jobs]
    for monitor, mode in candidates:
        if isinstance(monitor, str) and "${" not in monitor and mode in ("min", "max"):
            return monitor, mode
    return "val_accuracy", "max"  # conf/tfhydra.yaml's default


def _expected_jobs(sweep: Any) -> list[Job]:
    """The jobs a basic sweep was going to run, from multirun.yaml: those without a directory never started."""
    if not isinstance(sweep, dict):
        return []
    hydra = sweep.get("hydra") or {}
    sweeper = hydra.get("sweeper") or {}
    if not str(sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return []
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    arguments = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()] + list(
        (hydra.get("overrides") or {}).get("task") or [])
    try:
        batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(arguments), None)
    except Exception:  # glob() needs the config to expand: list the jobs that have directories only
        return []
    jobs = [list(job) for batch in batches for job in batch]
    return [Job(i, "", overrides, "not started") for i, overrides in enumerate(jobs)]


def _swept_keys(sweep: Any, jobs: list[Job]) -> set[str]:
    """Swept on the command line or in hydra.sweeper.params; without multirun.yaml (a search sweeper
    writes none), the keys whose values differ between jobs."""
    if isinstance(sweep, dict):
        hydra = sweep.get("hydra") or {}
        keys = sweep_override_keys((hydra.get("overrides") or {}).get("task") or [])
        return keys | set(((hydra.get("sweeper") or {}).get("params") or {}).keys())
    values = [dict(_split(o) for o in job.overrides) for job in jobs]
    keys = {k for v in values for k in v}
    return {k for k in keys if len({v.get(k) for v in values}) > 1}


def _ranked(jobs: list[Job], mode: str) -> list[Job]:
    order = lambda j: (j.num if j.num is not None else 1 << 30, j.name)  # noqa: E731
    ranked = [j for j in jobs if j.status == "completed" and j.best(mode)[0] is not None]
    ranked.sort(key=lambda j: (-j.best(mode)[0] if mode == "max" else j.best(mode)[0], order(j)))
    for rank, job in enumerate(ranked, start=1):
        job.rank = rank
    return ranked + sorted((j for j in jobs if j.rank is None), key=order)


# ---- small helpers ---------------------------------------------------------------------------

def _key(override: str) -> str:
    return override.split("=", 1)[0]


def _split(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key, value


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _blank(value: Any) -> Any:
    return "" if value is None else value


def _number(value: float | None, missing: str = "—") -> str:
    return missing if value is None or not math.isfinite(value) else f"{value:.4f}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
