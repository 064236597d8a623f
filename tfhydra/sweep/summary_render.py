"""A sweep's summary as files: `summary.csv` (every job, for a spreadsheet), `summary.md` (ranked, with the
jobs that did not complete and the command that reproduces the best) and `summary.png` (the monitored metric
per epoch). tfhydra/sweep/summary.py decides what they say; this module only lays it out.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from tfhydra.platform.terminal import figure
from tfhydra.record.monitor import Monitor
from tfhydra.record.report import atomic_path
from tfhydra.record.run_record import Status, test_name
from tfhydra.sweep.folds import FOLD
from tfhydra.sweep.jobs import split_override

SEED_KEY = "trainer.seed"
REPEAT_KEYS = (SEED_KEY, FOLD)  # jobs differing only by these measure one setting again: grouped, mean ± std


def to_csv(summary: Any) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_csv_header(summary))
    partner = {id(a): b for pair in summary.promotions for a, b in (pair, pair[::-1])}  # the other stage's job
    group_of = {id(j): g for g in summary.groups for j in g.jobs}
    ordered = [j for g in summary.groups for j in g.jobs] if summary.groups else summary.jobs
    for job in ordered:
        writer.writerow(_csv_row(summary, job, group_of.get(id(job)), partner.get(id(job))))
    return out.getvalue()


def _csv_header(summary: Any) -> list[str]:
    """summary.csv's columns: the job's (the task's headline figures first: `best_val_rmse`, `test_rmse`, ...), the
    swept keys', the groups' (seeds) and the stages' when there are any. The monitored metric's columns keep their
    names (`best_<monitor>`, `test_<metric>`)."""
    monitor, test = summary.monitor, f"test_{test_name(summary.monitor)}"
    grouped = [
        f"group_{name}"
        for name in ("rank", f"mean_{monitor}", f"std_{monitor}", "n", "overrides", f"mean_{test}", f"std_{test}")
    ]
    return [
        "rank",
        "job",
        "status",
        *(f"best_val_{n}" for n in summary.headline),
        *(f"test_{n}" for n in summary.headline),
        f"best_{monitor}",
        "best_epoch",
        f"final_{monitor}",
        test,
        "epochs",
        "wall_seconds",
        "stop_reason",
        "time_to_target_seconds",
        *summary.swept_keys,
        "overrides",
        "directory",
        "error",
        *(grouped if summary.groups else []),
        *(["stage", "promoted"] if summary.stages else []),
        *(["decision"] if summary.stages and summary.stages.why else []),
        *(["where"] if ran_on_a_cluster(summary.jobs) else []),
    ]


def ran_on_a_cluster(jobs: list) -> bool:
    """A `where` column (the SLURM or Ray job of each) when a job's record names one."""
    return any(job.where for job in jobs)


def _csv_row(summary: Any, job: Any, group: Any, partner: Any) -> list:
    """One job's row, in `_csv_header`'s columns: `group` its seeds' group, `partner` its job in the other stage."""
    best, epoch = job.best(summary.ranking)
    values = dict(split_override(o) for o in job.overrides)
    grouped = (
        [
            _blank(group.rank),
            _blank(group.mean),
            _blank(group.std),
            group.n,
            group.label,
            _blank(group.test_mean),
            _blank(group.test_std),
        ]
        if group
        else []
    )
    return [
        _blank(job.rank),
        _blank(job.num),
        job.status,
        *(_blank(job.figures.get(f"val_{n}")) for n in summary.headline),
        *(_blank(job.figures.get(f"test_{n}")) for n in summary.headline),
        _blank(best),
        _blank(epoch),
        _blank(job.final),
        _blank(job.test),
        len(job.history),
        _blank(job.wall_seconds and round(job.wall_seconds, 2)),
        job.stop_reason or "",
        _blank(job.time_to_target_seconds and round(job.time_to_target_seconds, 2)),
        *(values.get(k, "") for k in summary.swept_keys),
        " ".join(job.swept),
        job.name,
        job.error or "",
        *grouped,
        *([job.stage, _partner(partner)] if summary.stages else []),
        *([summary.stages.why] if summary.stages and summary.stages.why else []),
        *([job.where] if ran_on_a_cluster(summary.jobs) else []),
    ]


def to_markdown(summary: Any, plot: bool) -> str:
    monitor, ranking = summary.monitor, summary.ranking
    order = f"Ranked by the best `{monitor}` ({ranking.in_words})"
    lines = [f"# Sweep {summary.sweep_dir.name}", ""]
    if summary.stages is None:
        lines += [
            f"{len(summary.jobs)} jobs: {summary.counts()}. {order}; only completed jobs are ranked.",
            "",
            *_job_table(summary.jobs, ranking, headline=summary.headline),
        ]
    else:
        lines += _staged_tables(summary, order)
    test = test_name(monitor)
    lines += [
        "",
        f"Chosen on validation (`{monitor}`): the ranking, the best job and any promotion never read the test "
        f"split. `test {test}` is each completed job's exported weights measured once on the test split, after "
        "training; it was not used to choose (docs/sweeps.md).",
    ]
    if summary.groups:
        over = summary.groups[0].over
        folds = (
            [
                f"k-fold: each job validates on fold `{FOLD}` of what the test split leaves and trains on the other "
                "folds; the test split is the same in every job, measured on each job's kept weights.",
                "",
            ]
            if FOLD in over
            else []
        )
        lines += [
            "",
            f"## Settings over {summary.groups[0].over_in_words} (jobs that differ only by "
            f"{' and '.join(f'`{k}`' for k in over)})",
            "",
            *folds,
            f"Ranked by the mean of the best `{monitor}` of their completed jobs; std is the sample standard "
            "deviation; `jobs` lists the jobs of each setting.",
            "",
            f"| rank | setting | mean {monitor} | std | test {test} (mean ± std) | n | jobs |",
            "|---:|---|---:|---:|---:|---:|---|",
        ]
        for group in summary.groups:
            tested = "—" if group.test_mean is None else f"{figure(group.test_mean)} ± {figure(group.test_std)}"
            lines.append(
                f"| {_blank(group.rank) or '—'} | `{_cell(group.label)}` | {_number(group.mean)} | "
                f"{_number(group.std)} | {tested} | {group.n} | "
                f"{', '.join(_cell(j.name or str(j.num)) for j in group.jobs)} |"
            )
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


def _job_table(jobs: list, ranking: Monitor, partner: dict | None = None, headline: tuple[str, ...] = ()) -> list[str]:
    """One row per job, the task's `headline` figures first (validation at the best epoch, then test); `partner`: a
    staged sweep's screen table, {id(screen job): the job it was promoted to}; a `where` column when a job ran as a
    cluster's job."""
    monitor, cluster = ranking.name, ran_on_a_cluster(jobs)
    extra = ("| promoted to ", "---|") if partner is not None else ("", "")
    lead = "".join(f" val_{n} |" for n in headline) + "".join(f" test {n} |" for n in headline)
    lines = [
        f"| rank | job | overrides | status |{lead} best {monitor} | at epoch | final {monitor} | test "
        f"{test_name(monitor)} | epochs | wall time {extra[0]}|" + " where |" * cluster,
        "|---:|---|---|---|"
        + "---:|" * (2 * len(headline))
        + "---:|---:|---:|---:|---:|---:|"
        + extra[1]
        + "---|" * cluster,
    ]
    for job in jobs:
        best, epoch = job.best(ranking)
        name = f"[{_cell(job.name)}](<{job.name}/>)" if job.name else "—"
        cell = ""
        if partner is not None:
            other = partner.get(id(job))
            cell = f" {_cell(other.name or f'job {other.num} (not started)') if other else '—'} |"
        figures = [job.figures.get(f"val_{n}") for n in headline] + [job.figures.get(f"test_{n}") for n in headline]
        lines.append(
            f"| {_blank(job.rank) or '—'} | {name} | `{_cell(' '.join(job.swept))}` | {job.status} | "
            + "".join(f"{_number(f)} | " for f in figures)
            + f"{_number(best)} | {_blank(epoch) or '—'} | {_number(job.final)} | {_number(job.test)} | "
            f"{len(job.history)}{_stopped(job)} | "
            f"{_seconds(job.wall_seconds)} |{cell}" + f" {_cell(job.where) or '—'} |" * cluster
        )
    return lines


def _stopped(job: Any) -> str:
    """Why a job ended before its epochs ran out, beside its epochs: ` (patience)`, ` (time)`, ` (target)`."""
    return f" ({job.stop_reason})" if job.stop_reason and job.stop_reason != "epochs" else ""


def _staged_tables(summary: Any, order: str) -> list[str]:
    """A staged sweep: the promoted jobs (all the data), then the screen with what each setting was promoted to."""
    stages, monitor, ranking = summary.stages, summary.monitor, summary.ranking
    promote = [j for j in summary.jobs if j.stage == "promote"]
    screen = [j for j in summary.jobs if j.stage != "promote"]
    lines = [
        f"{len(summary.jobs)} jobs: {summary.counts()}. Screen, then promote: every setting on "
        f"{stages.describe()}, then the best {stages.promote} by `{monitor}` on all the data with the run's own "
        f"epochs. {order} within each stage; only completed jobs are ranked.",
        *(["", f"How the screen was chosen: {stages.why}."] if stages.why else []),
        "",
        f"## Promoted: all the data ({len(promote)} jobs)",
        "",
    ]
    lines += (
        _job_table(promote, ranking, headline=summary.headline)
        if promote
        else [
            "No setting was promoted: no screen job completed."
            if summary.screened
            else "No setting promoted yet: the screen has not finished (the same command continues it)."
        ]
    )
    settings = ", ".join(f"`{_cell(' '.join(s.swept))}` (from {_cell(s.name)})" for s, _ in summary.promotions)
    if summary.screened:
        lines += ["", f"Promoted settings, best screen first: {settings or 'none'}.", *summary.promotion_lines()[1:]]
    lines += ["", f"## Screen: {stages.describe()} ({len(screen)} jobs)", ""]
    return lines + _job_table(screen, ranking, {id(s): p for s, p in summary.promotions}, summary.headline)


def write_plot(summary: Any, path: Path) -> str | None:
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
            histories = [j.history for j in group.jobs if j.status == Status.COMPLETED and j.history]
            epochs = range(1, min(map(len, histories)) + 1) if histories else []
            means, stds = [], []
            for epoch in epochs:
                values = [h[epoch - 1] for h in histories if h[epoch - 1] is not None]
                mean = sum(values) / len(values) if values else math.nan
                means.append(mean)
                stds.append(
                    math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
                )
            if means:
                (line,) = axes.plot(list(epochs), means, marker="o", label=f"{group.label} (n={len(histories)})")
                axes.fill_between(
                    list(epochs),
                    [m - s for m, s in zip(means, stds, strict=True)],
                    [m + s for m, s in zip(means, stds, strict=True)],
                    color=line.get_color(),
                    alpha=0.2,
                )
    for job in [] if summary.groups else summary.jobs:
        points = [(i + 1, v) for i, v in enumerate(job.history) if v is not None]
        if points:
            epochs, job_values = zip(*points, strict=True)
            axes.plot(epochs, job_values, marker="o", label=f"{job.name} ({job.status})")
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


def _partner(job: Any) -> str:
    """A staged sweep's CSV: a screen job's promoted job, or a promoted job's screen job ('' when none)."""
    return "" if job is None else job.name or f"{job.num} (not started)"


def _blank(value: Any) -> Any:
    return "" if value is None else value


def _number(value: float | None, missing: str = "—") -> str:
    return missing if value is None or not math.isfinite(value) else figure(value)


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
