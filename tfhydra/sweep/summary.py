"""The summary of a sweep: `summary.csv`, `summary.md` and `summary.png` in the sweep directory.

Everything is read back from what the jobs left on disk (each job's `metrics.json`,
`.hydra/overrides.yaml`, `checkpoints/history.json`, and the sweep's `multirun.yaml`), so
the same code summarises a sweep that just ended, one still running, and one that was
interrupted (`python -m tfhydra.sweep summary <sweep dir>`). Jobs are ranked by their best
monitored metric (`trainer.monitor`, `trainer.monitor_mode`) as each job's record chose it (the epoch
it exported: tfhydra/record/monitor.py); only completed jobs are ranked, since a diverged or failed job exported
no model. Reading the jobs is tfhydra/sweep/jobs.py's,
laying out the files tfhydra/sweep/summary_render.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tfhydra.platform.terminal import figure
from tfhydra.record.headline import figures_in_words
from tfhydra.record.monitor import TIE_BREAKER, Monitor
from tfhydra.record.report import write_atomically
from tfhydra.record.run_record import Status, test_name
from tfhydra.record.rundir import SweepPaths
from tfhydra.sweep.jobs import (
    Group,
    Job,
    expected_jobs,
    history,
    key_of,
    merge_jobs,
    rank_jobs,
    read_sweep_jobs,
    sweep_monitor,
    swept_keys_of,
)
from tfhydra.sweep.stages import PROMOTE, Stages, staged_jobs, stages_of
from tfhydra.sweep.summary_render import REPEAT_KEYS, SEED_KEY, to_csv, to_markdown, write_plot
from tfhydra.trust.readers import plain_file

__all__ = ["Job", "Group", "Summary", "summarize", "write_summary", "seed_groups", "SEED_KEY"]


def seed_groups(summary: Summary) -> list[Group]:
    """Group the jobs by their swept overrides other than the repeat keys (`trainer.seed`, `data.fold`: REPEAT_KEYS),
    when one is swept; rank the groups by the mean of their completed jobs' best monitored value (only groups with a
    completed job): a k-fold sweep's settings by their fold mean."""
    over = tuple(k for k in REPEAT_KEYS if k in summary.swept_keys)
    if not over:
        return []
    by_setting: dict[tuple[str, ...], list[Job]] = {}
    for job in sorted(summary.jobs, key=lambda j: (j.num if j.num is not None else 1 << 30, j.name)):
        setting = tuple(o for o in job.swept if key_of(o).lstrip("+~") not in over)
        by_setting.setdefault(setting, []).append(job)
    groups = []
    for setting, jobs in by_setting.items():
        values = [j.best(summary.ranking)[0] for j in jobs if j.status == Status.COMPLETED]
        tests = [j.test for j in jobs if j.status == Status.COMPLETED and j.test is not None]
        groups.append(Group(list(setting), jobs, [v for v in values if v is not None], test_values=tests, over=over))
    scored = [(mean, g) for g in groups if (mean := g.mean) is not None]  # a mean: the group has values
    ranked = [g for _, g in sorted(scored, key=lambda mg: summary.ranking.sort_key(mg[0]))]
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
    groups: list[Group] = field(default_factory=list)  # jobs that differ only by trainer.seed or data.fold; best first
    stages: Stages | None = None  # a staged sweep (sweep.promote): its jobs ranked within each stage, promoted first
    promotions: list[tuple[Job, Job]] = field(default_factory=list)  # (screen job, its promoted job), best first
    screened: bool = True  # a staged sweep's screen has ended (else it has promoted nothing yet)

    @property
    def ranking(self) -> Monitor:
        """What ranks the jobs: the monitored metric, and which way is better."""
        return Monitor(self.monitor, self.mode)

    @property
    def headline(self) -> tuple[str, ...]:
        """The task's headline figures (as the test block names them) the summary shows before the monitored
        metric's columns: those of the first job whose record names them, less the monitored one (which has its
        own columns); empty for a task that names none, or whose headline is the monitored metric alone."""
        names = next((j.headline for j in self.jobs if j.headline), ())
        return tuple(n for n in names if n != test_name(self.monitor))

    @property
    def best(self) -> Job | None:
        """The best job: of the promoted ones in a staged sweep (the screen ranked settings, not models)."""
        final = PROMOTE if self.stages is not None else None
        return next((j for j in self.jobs if j.rank == 1 and j.stage == final), None)

    @property
    def unsuccessful(self) -> list[Job]:
        return [j for j in self.jobs if not j.status.succeeded]  # a pruned trial is a search's answer

    def counts(self) -> str:
        found = {s: sum(j.status == s for j in self.jobs) for s in Status if s is not Status.RUNNING}
        return ", ".join(f"{n} {s}" for s, n in found.items() if n)

    def reproduce(self, job: Job) -> str:
        """The job as a single run: its overrides, less the Optuna trial number (which only a search reads) and the
        sweep.* keys (a staged sweep's; a promoted job's overrides are its setting's, on all the data)."""
        overrides = [
            o
            for o in job.overrides
            if not o.startswith(("+optuna_trial=", "optuna_trial=")) and not key_of(o).lstrip("+~").startswith("sweep.")
        ]
        from tfhydra.platform.command import reproduce_command

        return reproduce_command(overrides)

    def report(self) -> str:
        """What the end of a sweep prints: the counts, the best job, how to rerun it, where the summary is."""
        lines = [f"sweep {self.sweep_dir}: {len(self.jobs)} jobs ({self.counts()})", *self.promotion_lines()]
        best = self.best
        if best is not None:
            lines.append(f"best job: {best.name} ({self.best_in_words(best)})")
            lines.append(f"reproduce: {self.reproduce(best)}")
        else:
            lines.append(f"best job: none (no {'promoted ' if self.stages else ''}job completed)")
        group = self.groups[0] if self.groups and self.groups[0].rank == 1 else None
        if group is not None:  # a setting measured over seeds or folds: the mean ranks it
            lines.append(
                f"best setting: {group.label} (mean {self.monitor}={figure(group.mean)} ± {figure(group.std)} over "
                f"{group.n} {group.over_in_words})"
            )
        lines.append(f"summary: {self.sweep_dir / 'summary.md'}")
        lines += self.notes
        return "\n".join(lines)

    def best_in_words(self, job: Job) -> str:
        """A job's chosen epoch, its task's headline first, as a run's end line says it: `val_rmse=60 val_r2=0.41 at
        epoch 12, chosen by val_loss=3601; test rmse=58 r2=0.44, not used to choose`."""
        value, epoch = job.best(self.ranking)
        own = job.monitor == self.monitor  # ranked by another metric than the job's: that one alone
        names = job.headline if own else ()
        shown = figures_in_words(job.figures, names, "val_")
        said = f"{shown or f'{self.monitor}={figure(value)}'} at epoch {epoch}"
        if shown and self.monitor not in [f"val_{n}" for n in names]:
            said += f", chosen by {self.monitor}={figure(value)}"
        if job.tie and own:
            said += f" ({job.tie})"
        tests = {n: job.figures[f"test_{n}"] for n in names if f"test_{n}" in job.figures}
        tested = figures_in_words(tests, names) or (
            f"{test_name(self.monitor)}={figure(job.test)}" if job.test is not None else ""
        )
        return f"{said}; test {tested}, not used to choose" if tested else said

    def promotion_lines(self) -> list[str]:
        """A staged sweep: what the screen ran, and which settings it promoted to which jobs."""
        if self.stages is None:
            return []
        screened = [j for j in self.jobs if j.stage != PROMOTE]
        pairs = (
            ", ".join(
                f"{s.name} ({self.monitor}={figure(s.best(self.ranking)[0])}) -> {p.name or f'job {p.num}'}"
                for s, p in self.promotions
            )
            or "none"
        )
        if not self.screened:
            pairs = "not yet (the screen has not finished)"
        why = f" ({self.stages.why})" if self.stages.why else ""  # decide mode: how the screen was chosen
        lines = [
            f"screen: {len(screened)} settings on {self.stages.describe()}{why}; promoted to all the data: {pairs}"
        ]
        if self.screened and len(self.promotions) < self.stages.promote:
            lines.append(
                f"promoted {len(self.promotions)} instead of sweep.promote={self.stages.promote}: only "
                f"{len(self.promotions)} of the {len(screened)} screen jobs completed"
            )
        return lines


def tie_notes(ranked: list[Job], ranking: Monitor) -> list[str]:
    """Which ranked jobs (of one stage) tie exactly on their best monitored value, and what ranked them
    (tfhydra/record/monitor.py: the lower val_loss of their best epochs, then the job number)."""
    tied: dict[tuple[str | None, float], list[Job]] = {}
    for job in ranked:
        value = job.best(ranking)[0]
        if job.rank is not None and value is not None:
            tied.setdefault((job.stage, value), []).append(job)
    notes = []
    for (_, value), jobs in tied.items():
        if len(jobs) > 1:
            losses = {job.best_loss(ranking) for job in jobs}
            how = "the lower val_loss of their best epochs" if len(losses) > 1 else "job number (equal val_loss)"
            names = ", ".join(j.name or str(j.num) for j in jobs)
            notes.append(f"jobs {names} tie at {ranking.name}={figure(value)}: ranked by {how}")
    return notes


def test_notes(jobs: list[Job], monitor: str) -> list[str]:
    """Which jobs have no test figure because their record predates the test split (read, and said)."""
    notes = []
    old = [j.name for j in jobs if j.before_test_split]
    if old:
        notes.append(
            f"{len(old)} job(s) recorded before the test split (metrics.json schema_version < 2) have "
            f"no test figure: {', '.join(old[:5])}{' ...' if len(old) > 5 else ''}"
        )
    return notes


def summarize(sweep_dir: str | Path, write: bool = True) -> Summary:
    """Read every job of the sweep in `sweep_dir`, rank them, and (by default) write the summary files."""
    sweep_dir = Path(sweep_dir)
    paths = SweepPaths(sweep_dir)
    sweep = plain_file(paths.multirun, paths.root)
    found = read_sweep_jobs(sweep_dir)
    monitor, mode = sweep_monitor(sweep, found)
    ranking = Monitor(monitor, mode)
    stages = stages_of(sweep)
    if stages is None:
        jobs = merge_jobs(expected_jobs(sweep), found)
        promotions: list[tuple[Job, Job]] = []
        for job in jobs:
            if job.name:
                job.history = history(paths.job(job.name), monitor)
    else:
        jobs, promotions, decided = staged_jobs(sweep_dir, expected_jobs(sweep), found, stages, ranking)
    keys = swept_keys_of(sweep, jobs)
    for job in jobs:
        job.swept = [o for o in job.overrides if key_of(o) in keys] or list(job.overrides)
    if stages is None:
        summary = Summary(sweep_dir, monitor, mode, sorted(keys), rank_jobs(jobs, ranking))
        summary.groups = seed_groups(summary)
    else:  # each stage ranked on its own: a screen's figures are not a full run's
        ranked = [
            *rank_jobs([j for j in jobs if j.stage == PROMOTE], ranking),
            *rank_jobs([j for j in jobs if j.stage != PROMOTE], ranking),
        ]
        summary = Summary(
            sweep_dir, monitor, mode, sorted(keys), ranked, stages=stages, promotions=promotions, screened=decided
        )
    if ranking.name != TIE_BREAKER:  # ranked by the loss itself: a tie goes by job number
        summary.notes += tie_notes(summary.jobs, ranking)
    summary.notes += test_notes(jobs, monitor)
    if write:
        write_summary(summary)
    return summary


def write_summary(summary: Summary) -> None:
    """Each file is replaced whole (tfhydra.record.report): a summary rebuilt while someone reads it, or a
    sweep killed while writing it, leaves the previous file or the new one, never half of one."""
    paths = SweepPaths(summary.sweep_dir)
    write_atomically(paths.summary_csv, to_csv(summary))
    plot_note = write_plot(summary, paths.summary_png)
    if plot_note:
        summary.notes.append(plot_note)
    write_atomically(paths.summary_md, to_markdown(summary, plot=plot_note is None))
