"""Screen, then promote: a grid sweep in two stages, in one sweep directory (docs/sweeps.md).

`python train.py -m optimizer.lr=1e-3,5e-4,1e-4 data.batch_size=32,64 sweep.screen.fraction=0.1
sweep.screen.epochs=3 sweep.promote=2`: stage 1 (`screen/`) runs every setting of the grid with
`data.fraction`, `trainer.epochs` set to the screen's and no export; stage 2 (`promote/`) runs the best
`sweep.promote` of them, by `trainer.monitor` and `trainer.monitor_mode` as the summary ranks them (each screen
record's best epoch, tfhydra/record/monitor.py; completed jobs only, ties by job number), with their own overrides: all
the data, the run's own epochs and export.

The stages are launched by tfhydra's default sweeper (hydra_plugins/tfhydra_basic/) on whatever launcher the
config chose. Job numbers go on across the stages (screen 0..N-1, promote N..N+K-1), so a job number names
one job of the sweep; each stage's jobs live in their stage's folder (`screen/0_optimizer.lr=0.001`), named
as any sweep's job by the configured `hydra.sweep.subdir`. Run again, the same command keeps every completed
job of either stage (tfhydra/sweep/trial.py): the screen's records are kept, so the same settings are promoted.
Nothing here imports TensorFlow; it reads only the jobs' records (tfhydra/sweep/jobs.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import is_int, is_number
from tfhydra.platform.terminal import figure
from tfhydra.record.monitor import Monitor
from tfhydra.record.run_record import Status
from tfhydra.record.rundir import STAGES, SweepPaths
from tfhydra.sweep.handover import override_quoted
from tfhydra.sweep.jobs import Job, history, key_of, merge_jobs, rank_jobs, read_sweep_jobs

SCREEN, PROMOTE = STAGES
UNDECIDED = (Status.NOT_STARTED, Status.INTERRUPTED, Status.RUNNING)  # a screen job that has not ended yet
KEYS = ("sweep.screen.fraction", "sweep.screen.epochs", "sweep.promote")  # conf/tfhydra.yaml's sweep section
# What a screen job leaves out unless the command line sets it: a screen ranks settings by their scalars, and its
# first weight histograms cost each job about 0.8 s of eager ops (docs/sweeps.md "Screen, then promote").
LEAN = {"logging.histogram_freq": "0"}


@dataclass(frozen=True)
class Stages:
    fraction: float | None  # the screen's data.fraction (None: all the data)
    epochs: int | None  # the screen's trainer.epochs (None: the run's own)
    promote: int  # how many settings go on to stage 2
    why: str = ""  # decide mode (tfhydra/sweep/decide.py): how these values were chosen; "" when typed

    @property
    def screen_overrides(self) -> dict[str, str]:
        """What a screen job sets over its setting's overrides: a share of the data, fewer epochs, no export."""
        found = {"data.fraction": self.fraction, "trainer.epochs": self.epochs}
        return {**{k: str(v) for k, v in found.items() if v is not None}, "export.formats": "[]"}

    def describe(self) -> str:
        """`10% of the data for 3 epochs`: what the screen trains, for the summary."""
        data = "all the data" if self.fraction in (None, 1, 1.0) else f"{self.fraction:.0%} of the data"
        epochs = "the run's own epochs" if self.epochs is None else f"{self.epochs} epochs"
        return f"{data} for {epochs}"


def stages_of(cfg: Any) -> Stages | None:
    """The sweep's stages from its config (a DictConfig, or multirun.yaml read as plain data, where a value of
    another type reads as unset); None when `sweep.promote` is unset: a sweep as any other."""
    sweep: Any = cfg.get("sweep") if isinstance(cfg, (dict, DictConfig)) else None
    promote = sweep.get("promote") if isinstance(sweep, (dict, DictConfig)) else None
    if not is_int(promote):
        return None
    screen = sweep.get("screen") if isinstance(sweep.get("screen"), (dict, DictConfig)) else {}
    fraction, epochs = screen.get("fraction"), screen.get("epochs")
    why = sweep.get("decided") if isinstance(sweep.get("decided"), str) else ""  # written by decide mode
    return Stages(fraction if is_number(fraction) else None, epochs if is_int(epochs) else None, promote, why)


def set_values(cfg: Any) -> list[str]:
    """`key=value` of each sweep.* key the config sets (for a single run's warning)."""
    return [
        f"{key}={OmegaConf.select(cfg, key)}" for key in KEYS if OmegaConf.select(cfg, key, default=None) is not None
    ]


def screen_job(overrides: Sequence[str], stages: Stages) -> list[str]:
    """A setting's overrides as its screen job runs them: the screen's values replace the setting's own; LEAN's
    are added where the command line did not set them."""
    extra, given = stages.screen_overrides, {key_of(o).lstrip("+~") for o in overrides}
    lean = [f"{k}={v}" for k, v in LEAN.items() if k not in given]
    return [o for o in overrides if key_of(o) not in extra] + [f"{k}={v}" for k, v in extra.items()] + lean


def stage_subdir(stage: str, config: DictConfig) -> str:
    """The Hydra override that puts a job in its stage's folder, in front of the configured subdir (its
    interpolations left for the job to resolve, as Hydra does for every job)."""
    subdir = cast(dict, OmegaConf.to_container(config.hydra.sweep, resolve=False))["subdir"]  # a DictConfig node
    return f"hydra.sweep.subdir={override_quoted(f'{stage}/{subdir}')}"


def check_promote(promote: int, settings: int) -> None:
    """The screen must leave a setting out: `sweep.promote` below the grid's number of settings."""
    if promote >= settings:
        raise ConfigError(
            "sweep.promote",
            promote,
            f"an integer in [1, {settings - 1}], fewer than the {settings} settings of the grid"
            if settings > 1
            else "a sweep of at least 2 settings (e.g. optimizer.lr=1e-3,1e-4) to screen",
            f"the grid has {settings} setting{'s' * (settings > 1)}: the screen would leave none out",
        )


def run_stages(
    config: DictConfig, stages: Stages, grid: list[list[str]], launch: Callable[[list[list[str]], int], list]
) -> list:
    """Launch the screen (every setting of `grid`), rank its jobs from their records, launch the promoted ones."""
    check_promote(stages.promote, len(grid))  # the pre-flight's check, for a grid only the sweeper expands (glob())
    sweep_dir = Path(config.hydra.sweep.dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(config, SweepPaths(sweep_dir).multirun)  # as Hydra's basic sweeper does: what resume reads
    if stages.why:
        print(f"screen: {stages.describe()}, then the best {stages.promote}: {stages.why}", flush=True)
    returns = [launch([[*screen_job(job, stages), stage_subdir(SCREEN, config)] for job in grid], 0)]
    monitor = Monitor(config.trainer.monitor, config.trainer.monitor_mode)
    chosen = promoted(screen_jobs(sweep_dir, monitor.name, grid, stages), monitor, stages.promote)
    print(promotion_line(chosen, len(grid), stages, monitor), flush=True)
    if chosen:
        # a screen job's number is its setting's index in `grid`: every chosen one has it
        settings = [grid[cast(int, job.num)] for job in chosen]
        returns.append(launch([[*setting, stage_subdir(PROMOTE, config)] for setting in settings], len(grid)))
    return returns


def screen_jobs(sweep_dir: Path, monitor: str, grid: list[list[str]], stages: Stages) -> list[Job]:
    """The screen stage's jobs of this grid as they stand on disk (records and histories): job `n` of the screen
    is setting `n` of the grid; a directory another command left there (other overrides) is not one of them."""
    expected = [Job(n, "", screen_job(job, stages), Status.NOT_STARTED, stage=SCREEN) for n, job in enumerate(grid)]
    jobs = [j for j in merge_jobs(expected, [j for j in read_sweep_jobs(sweep_dir) if j.stage == SCREEN]) if j.name]
    for job in jobs:
        job.history = history(SweepPaths(sweep_dir).job(job.name), monitor)
    return jobs


def staged_jobs(
    sweep_dir: Path, grid: list[Job], found: list[Job], stages: Stages, monitor: Monitor
) -> tuple[list[Job], list[tuple[Job, Job]], bool]:
    """For the summary: every job of a staged sweep (the screen's, then the promoted ones; not started until a
    directory says otherwise), the (screen job, promoted job) pairs, best first, and whether the screen has
    decided (every screen job ended: a summary of a sweep killed during its screen promotes nothing yet). `grid`: the
    settings the recorded command expands to (tfhydra/sweep/jobs.py's expected_jobs; none for glob()), else what
    was found."""
    paths = SweepPaths(sweep_dir)
    screen = merge_jobs(
        [Job(j.num, "", screen_job(j.overrides, stages), Status.NOT_STARTED, stage=SCREEN) for j in grid],
        [j for j in found if j.stage == SCREEN],
    )
    for job in screen:
        job.stage = SCREEN
        job.history = history(paths.job(job.name), monitor.name) if job.name else []
    decided = all(j.status not in UNDECIDED for j in screen)  # an unfinished screen has promoted nothing yet
    chosen, first = promoted(screen, monitor, stages.promote) if decided else [], len(grid) or len(screen)
    settings = {j.num: j.overrides for j in grid}
    planned = [
        Job(first + rank, "", settings[job.num], Status.NOT_STARTED, stage=PROMOTE)
        for rank, job in enumerate(chosen)
        if job.num in settings
    ]
    promote = merge_jobs(planned, [j for j in found if j.stage == PROMOTE])
    for job in promote:
        job.stage = PROMOTE
        job.history = history(paths.job(job.name), monitor.name) if job.name else []
    by_number = {j.num: j for j in promote}
    pairs = [(job, by_number[first + rank]) for rank, job in enumerate(chosen) if first + rank in by_number]
    return screen + promote, pairs, decided


def promoted(jobs: list[Job], monitor: Monitor, count: int) -> list[Job]:
    """The best `count` completed screen jobs by their record's best monitored value (as the summary ranks them),
    best first."""
    return [j for j in rank_jobs(jobs, monitor) if j.rank is not None][:count]


def promotion_line(chosen: list[Job], settings: int, stages: Stages, monitor: Monitor) -> str:
    """What the screen decided, printed before the promoted jobs start: the settings promoted (with their screen
    values), and fewer than asked when fewer screen jobs completed."""
    names = ", ".join(f"{j.name} ({monitor.name}={figure(j.best(monitor)[0])})" for j in chosen) or "none"
    line = f"promoting to all the data: {names}: the best of {settings} settings on {stages.describe()}"
    if len(chosen) < stages.promote:
        line += (
            f" (only {len(chosen)} of the {settings} screen jobs completed: {len(chosen)} promoted instead of "
            f"sweep.promote={stages.promote})"
        )
    return line
