"""A sweep's job lost by its launcher: killed on a cluster (out of memory, a lost node, a preempted worker).

A job that raises is recorded by the job itself (tfhydra/sweep/trial.py); a job killed with SIGKILL cannot
say anything, and the launcher then raises in the launching process once it collects the batch (submitit:
`UncompletedJobError`; Ray: `WorkerCrashedError`, `NodeDiedError`, `OutOfMemoryError`), which Hydra prints as
a traceback, skipping the sweep callback's summary. tfhydra's entry point (tfhydra/__main__.py) therefore
hands every sweeper a guarded launcher: on such an error it waits for the batch's other jobs, records each
lost one as failed with the launcher's reason, writes the summary and ends the command with one `Error:` line
and exit 1 (tfhydra/sweep/callback.py: `finish_sweep`). The sweep's later batches are not launched: a cluster
that loses jobs is for the user to look at, and the same command continues the sweep (completed jobs are kept).

A cluster that stops answering while its jobs run (a Ray head, a SLURM controller) ends the same way once
`sweep.cluster_timeout` passes (tfhydra/launch/cluster_watch.py watches it beside the launch), and SIGTERM/SIGINT
during the launch end the command within seconds with a `Stopped:` line and the command that resumes.

Hydra gives no hook between a sweeper and its launcher, so the guard wraps `Plugins.instantiate_launcher`
while the command runs; the launchers themselves and the config (multirun.yaml) are unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from tfhydra.config.errors import clip

log = logging.getLogger("tfhydra")
LAUNCHER_MODULES = ("submitit", "ray")  # the packages whose exceptions say a job was lost, not a job's own error


@contextlib.contextmanager
def guarded_launchers():
    """Every launcher a sweeper instantiates inside the block is a GuardedLauncher."""
    from hydra.core.plugins import Plugins

    original = Plugins.instantiate_launcher

    def instantiate_launcher(self, hydra_context, task_function, config):
        launcher = original(self, hydra_context=hydra_context, task_function=task_function, config=config)
        return GuardedLauncher(launcher, config)

    Plugins.instantiate_launcher = instantiate_launcher  # type: ignore[method-assign]  # patched for the block only
    try:
        yield
    finally:
        Plugins.instantiate_launcher = original  # type: ignore[method-assign]


class GuardedLauncher:
    """The sweeper's launcher, whose `launch` turns a lost job into the sweep's summary and one error line."""

    def __init__(self, launcher: Any, config: DictConfig) -> None:
        self.launcher, self.config = launcher, config

    def __getattr__(self, name: str) -> Any:  # everything else is the launcher's
        return getattr(self.launcher, name)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[Any]:
        from tfhydra.launch.cluster_watch import watching

        batch = Batch(self.config, job_overrides, initial_job_idx)
        with watching(self.config, self.launcher, batch):
            try:
                return self.launcher.launch(job_overrides, initial_job_idx=initial_job_idx)
            except Exception as error:
                if not is_lost_job(error):
                    raise
                wait_for_batch(error)
                disconnect_ray()
                batch.end_lost(launcher_reason(error))
                raise  # not reached: end_lost exits


def is_lost_job(error: BaseException) -> bool:
    """An exception of a cluster launcher's own package (submitit's, Ray's); a job's own errors never get here."""
    return any(cls.__module__.split(".")[0] in LAUNCHER_MODULES for cls in type(error).__mro__)


def launcher_reason(error: BaseException) -> str:
    """`UncompletedJobError: Job 12_1 (task: 0) ... has not produced any output (state: FAILED)`: the launcher's
    words up to the job's own error stream (which a SIGKILL leaves empty, and which is in the job's log)."""
    text = str(error).split("Error stream produced:", 1)[0]
    return clip(f"{type(error).__name__}: {' '.join(text.split())}", 240)


def wait_for_batch(error: BaseException) -> None:
    """Let the batch's other jobs finish before the summary reads them. The launcher raised while collecting
    its jobs one by one; its frame still holds them (submitit's `jobs`, Ray's `runs`), and they keep running
    on the cluster: each is waited for, whatever it ends with."""
    tb = error.__traceback__
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            if isinstance(value, list) and value:
                _wait_all(value)
        tb = tb.tb_next


def _wait_all(handles: list) -> None:
    if all(callable(getattr(h, "wait", None)) and callable(getattr(h, "done", None)) for h in handles):  # submitit
        for handle in handles:
            with contextlib.suppress(Exception):
                handle.wait()
    elif all(type(h).__name__ == "ObjectRef" for h in handles):  # Ray
        import ray

        with contextlib.suppress(Exception):
            ray.wait(handles, num_returns=len(handles), timeout=None)


def disconnect_ray() -> None:
    """A Ray driver forwards its workers' output to this stderr from a thread, which would print after the one
    error line: disconnected first (what is buffered comes out now), as the process would at exit anyway."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        with contextlib.suppress(Exception):
            ray.shutdown()


def job_dir(sweep_dir: Path, number: int) -> Path | None:
    """The directory Hydra made for job `number` (`<num>_<overrides>`, conf/tfhydra.yaml; in its stage's folder in a
    staged sweep, whose job numbers go on across its stages); None before it started."""
    from tfhydra.record.rundir import SweepPaths

    return next(
        (d for d in SweepPaths(sweep_dir).jobs() if d.name == str(number) or d.name.startswith(f"{number}_")), None
    )


class Batch:
    """The jobs of one launch, and how the sweep ends when they are lost or the command is stopped."""

    def __init__(self, config: DictConfig, job_overrides: Sequence[Sequence[str]], first: int) -> None:
        self.config, self.jobs = config, list(enumerate(job_overrides, first))
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        self.launched = time.time()  # a record older than this is an earlier launch's (a resumed sweep)

    def end_lost(self, reason: str) -> None:
        """The launcher said a job was lost (`reason`, its words): the lost jobs recorded, the summary, the
        sweep's trackers and the one error line (SystemExit: Hydra lets it through)."""
        from tfhydra.sweep.trial import KILLED

        self._end_failed(f"{KILLED}: {reason}", reason)

    def end_silent(self, said: str) -> None:
        """The cluster stopped answering (tfhydra/launch/cluster_watch.py; `said` names it, its address and the
        key, and how the sweep goes on): the unfinished jobs recorded failed with that, then as `end_lost`."""
        self._end_failed(f"lost by the launcher: {said}", said)

    def end_stopped(self, signum: int, jobs_end_with_us: bool) -> None:
        """SIGTERM/SIGINT while the launcher waits: jobs that end with this process (Ray's) recorded interrupted,
        then the `Stopped:` line with the command that resumes, and exit 128 + the signal."""
        from tfhydra.record.run_record import Status
        from tfhydra.sweep.trial import record_lost

        name = signal.Signals(signum).name
        if jobs_end_with_us:
            for number, overrides in self.jobs:
                directory = job_dir(self.sweep_dir, number)
                if directory is not None:
                    said = f"interrupted by {name} (the launching command)"
                    record_lost(directory, list(overrides), said, Status.INTERRUPTED)
        where = "were stopped with it" if jobs_end_with_us else "go on on the cluster until they end or are cancelled"
        print(
            f"Stopped: {name}: the sweep's running jobs {where}; resume with: tfhydra-sweep resume {self.sweep_dir}",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(128 + signum)

    def ended_places(self) -> list[dict] | None:
        """Where each job of the batch ran (its record's `scheduler`) when every one has recorded its end and one
        was interrupted (stopped by a signal: submitit has no result of it, where a job that raised leaves one);
        None otherwise (a job without a record, or still running, or none interrupted)."""
        from tfhydra.record.run_record import Status, read_record

        dirs = [job_dir(self.sweep_dir, n) for n, _ in self.jobs]
        if any(d is None or not _written_since(d, self.launched) for d in dirs):
            return None  # a job of this launch has not recorded anything yet (a resumed job's record is older)
        records = [read_record(d) if d else None for d in dirs]
        if any(r is None or not r.status.finished or not r.scheduler for r in records):
            return None
        ended = [r for r in records if r is not None and r.scheduler]
        return [r.scheduler or {} for r in ended] if any(r.status == Status.INTERRUPTED for r in ended) else None

    def end_waiting(self) -> None:
        """Every job ended and left the queue, and the launcher still waits (SLURM without accounting): the
        summary and its one line, as after the launcher's own return."""
        from tfhydra.sweep.callback import finish_sweep

        log.error("the launcher still waits for jobs that have ended and left SLURM's queue (no sacct)")
        finish_sweep(self.config)
        sys.exit(0)

    def _end_failed(self, recorded: str, said: str) -> None:
        from tfhydra.sweep.callback import finish_sweep
        from tfhydra.sweep.trial import record_lost

        lost = []  # the jobs Hydra made a directory for; the summary names the others `<n> (not started)`
        for number, overrides in self.jobs:
            directory = job_dir(self.sweep_dir, number)
            if directory is not None and record_lost(directory, list(overrides), recorded):
                lost.append(directory.name)
        log.error("the launcher lost %s: %s", ", ".join(lost) or "a job", said)
        finish_sweep(self.config, lost_line=f"{', '.join(lost) or 'a job'} lost by the launcher ({said})")


def _written_since(job: Path, moment: float) -> bool:
    """Has the job's record been written at or after `moment` (wall-clock seconds)?"""
    from tfhydra.record.rundir import RunPaths

    try:
        return RunPaths(job).metrics.stat().st_mtime >= moment
    except OSError:
        return False
