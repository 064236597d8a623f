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

from tfhydra.record import Status
from tfhydra.report import atomic_path
from tfhydra.sweep.jobs import split_override

SEED_KEY = "trainer.seed"


def to_csv(summary: Any) -> str:
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
        values = dict(split_override(o) for o in job.overrides)
        group = group_of.get(id(job))
        writer.writerow([_blank(job.rank), _blank(job.num), job.status, _blank(best), _blank(epoch), _blank(job.final),
                         len(job.history), _blank(job.wall_seconds and round(job.wall_seconds, 2)),
                         *(values.get(k, "") for k in summary.swept_keys), " ".join(job.swept), job.name,
                         job.error or "", *([_blank(group.rank), _blank(group.mean), _blank(group.std), group.n,
                                             group.label] if group else [])])
    return out.getvalue()


def to_markdown(summary: Any, plot: bool) -> str:
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


def _blank(value: Any) -> Any:
    return "" if value is None else value


def _number(value: float | None, missing: str = "—") -> str:
    return missing if value is None or not math.isfinite(value) else f"{value:.4f}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
