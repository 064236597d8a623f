"""The worker processes of tfhydra's launcher (hydra_plugins/tfhydra_launcher): forked once per sweep from a fork
server that has imported TensorFlow but never started its runtime (tfhydra/launch/fork_server.py: the launching
process stays free of TensorFlow, and a forked TensorFlow runtime deadlocks), each with its placement
(tfhydra/launch/placement.py) in its environment before the runtime starts, and each reused for job after job:
TensorFlow is imported once per sweep, not once per worker or job.

A worker takes the next job from one shared queue as soon as it is free (short jobs do not wait behind long
ones), runs it as Hydra's own launchers do (`hydra.core.utils.run_job`: the job's directory, `.hydra/`, its log
file, its callbacks), then clears the Keras session and collects garbage so its memory stays flat.

Isolation and stopping:
- a job's own failure is recorded by the job (tfhydra/sweep/trial.py); a worker that dies (out of memory, a
  crash) has its job recorded as failed (`record_lost`) and a new worker takes its place;
- workers run in their own process group: SIGINT/SIGTERM reach the launching process, which passes the signal
  on once to each busy worker (its job saves its state and records `interrupted`, resumable by running the
  sweep again), waits for them, and stops;
- a worker whose launching process was killed outright (SIGKILL) is killed with it (a thread watching that
  process; Linux's parent-death signal for the fork server), as if it had stayed in that process's group.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfhydra.launch.fork_server import start_fork_server, worker_environment
from tfhydra.launch.placement import WorkerPlan
from tfhydra.launch.worker_process import worker_main

log = logging.getLogger("tfhydra")


class WorkerPool:
    """N workers forked from the fork server, one task queue, one result queue; kept for the launching process's
    life."""

    def __init__(self, plans: Sequence[WorkerPlan]) -> None:
        self.context = start_fork_server()
        self.tasks = self.context.Queue()
        self.results = self.context.Queue()
        self.plans = list(plans)
        self.processes: dict[int, Any] = {}  # plan index -> process
        for plan in self.plans:
            self._start(plan)

    def _start(self, plan: WorkerPlan) -> None:
        process = self.context.Process(
            target=worker_main,
            args=(worker_environment(plan.env), self.tasks, self.results, os.getpid()),
            name=f"tfhydra-worker-{plan.index}",
            daemon=True,
        )
        process.start()
        self.processes[plan.index] = process

    def run(self, jobs: list[tuple], sweep_dir: Path) -> dict[int, Any]:
        """Every job `(idx, overrides, ...)` run; returns idx -> JobReturn. A signal stops the workers' jobs and
        raises KeyboardInterrupt once they have recorded their state."""
        overrides = {job[0]: job[1] for job in jobs}
        for job in jobs:
            self.tasks.put(job)
        running: dict[int, int] = {}  # pid -> job idx
        returns: dict[int, Any] = {}
        with forwarded_signals(self) as stopped:
            while len(returns) < len(jobs):
                if stopped:
                    self._drain(running, returns)
                    raise KeyboardInterrupt(stopped[0])
                try:
                    kind, idx, pid, value = self.results.get(timeout=0.5)
                except queue.Empty:
                    self._replace_dead(running, returns, overrides, sweep_dir)
                    continue
                if kind == "start":
                    running[pid] = idx
                else:
                    running.pop(pid, None)
                    returns[idx] = self._finished(idx, pid, value)
                    if kind == "stopped":  # the job was interrupted inside the worker: stop the sweep
                        stopped.append(signal.SIGINT)
        return returns

    @staticmethod
    def _finished(idx: int, pid: int, value: Any) -> Any:
        if not isinstance(value, tuple):
            return value
        returned, ordinal, (rss, peak) = value
        log.info(
            "job %d done in worker pid %d (the %s job that worker ran): RSS %.0f MB, peak %.0f MB",
            idx,
            pid,
            _ordinal(ordinal),
            rss,
            peak,
        )
        return returned

    def _drain(self, running: dict[int, int], returns: dict[int, Any]) -> None:
        """After a signal: no new job starts; the busy workers' jobs save and stop; the idle workers exit."""
        while True:
            try:
                self.tasks.get_nowait()
            except queue.Empty:
                break
        for process in self.processes.values():
            if process.is_alive() and process.pid in running:
                with _suppressed():
                    os.kill(process.pid, signal.SIGINT)
        deadline = time.monotonic() + 120
        while running and time.monotonic() < deadline and any(p.is_alive() for p in self.processes.values()):
            try:
                kind, idx, pid, value = self.results.get(timeout=0.5)
            except queue.Empty:
                continue
            if kind != "start":
                running.pop(pid, None)
                returns[idx] = self._finished(idx, pid, value)
        self.close()

    def _replace_dead(self, running: dict[int, int], returns: dict[int, Any], overrides: dict, sweep_dir) -> None:
        for plan in self.plans:
            process = self.processes[plan.index]
            if process.is_alive():
                continue
            idx = running.pop(process.pid, None)
            if idx is not None:
                returns[idx] = lost_job_return(sweep_dir, idx, overrides[idx], process)
            if idx is not None or process.exitcode:
                log.warning(
                    "worker %d (pid %s) ended (exit code %s); starting another",
                    plan.index,
                    process.pid,
                    process.exitcode,
                )
            self._start(plan)

    def replace(self, plans: Sequence[WorkerPlan]) -> None:
        """New workers placed for a smaller launch, forked from the same server (no TensorFlow import again): the
        idle workers of the last launch end first, so a lone promoted job gets every core, as a single run does
        (and its numbers match the single run its reproduce line gives)."""
        self._stop_workers()
        self.plans = list(plans)
        for plan in self.plans:
            self._start(plan)

    def close(self) -> None:
        self._stop_workers()
        for channel in (self.tasks, self.results):  # what no worker will read must not hold this process at exit
            channel.cancel_join_thread()

    def _stop_workers(self) -> None:
        for _ in self.processes:
            with _suppressed():
                self.tasks.put(None)
        for process in self.processes.values():
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
        self.processes.clear()


class _suppressed:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], (OSError, ValueError))


class forwarded_signals:
    """SIGINT and SIGTERM in the launching process append to the list it yields instead of stopping it mid-way:
    the pool then stops its workers' jobs cleanly (they record `interrupted`)."""

    def __init__(self, pool: WorkerPool) -> None:
        self.stopped: list[int] = []
        self.previous: dict = {}

    def __enter__(self) -> list[int]:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, lambda s, f: self.stopped.append(s))
        return self.stopped

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


def lost_job_return(sweep_dir: Path, idx: int, overrides: Sequence[str], process: Any) -> Any:
    """A job whose worker died: recorded as failed (its directory, when Hydra made one), NaN returned."""
    from hydra.core.utils import JobReturn, JobStatus

    from tfhydra.launch.lost_jobs import job_dir
    from tfhydra.sweep.trial import KILLED, record_lost

    directory = job_dir(Path(sweep_dir), idx)
    reason = f"the worker process {process.pid} running it ended with exit code {process.exitcode}"
    if directory is not None:
        record_lost(directory, list(overrides), f"{KILLED}: {reason}")
    log.error("job %d (%s): %s", idx, " ".join(overrides), reason)
    result = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
    result.return_value = math.nan
    return result


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
