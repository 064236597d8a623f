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
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfhydra.config.hydra_api import job_return_value, set_job_return_value
from tfhydra.launch.fork_server import start_fork_server, worker_environment
from tfhydra.launch.placement import WorkerPlan
from tfhydra.platform.runtime import WORKER_ENV
from tfhydra.platform.terminal import TaggedLines
from tfhydra.trust.locks import process_alive

log = logging.getLogger("tfhydra")
WORKER_JOB_ENV = "TFHYDRA_WORKER_JOB"  # the job's ordinal in its worker (1 = its first), for the record
MAX_JOBS_ENV = "TFHYDRA_WORKER_MAX_JOBS"  # hydra.launcher.max_jobs_per_worker: a worker ends after that many jobs

TAGGED = TaggedLines()  # a worker's descriptors 1 and 2, tagged with the job it runs


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
        log.info("job %d done in worker pid %d (its job %d): RSS %.0f MB, peak %.0f MB", idx, pid, ordinal, rss, peak)
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
    from tfhydra.sweep.trial import record_lost

    directory = job_dir(Path(sweep_dir), idx)
    reason = f"the worker process {process.pid} running it ended with exit code {process.exitcode}"
    if directory is not None:
        record_lost(directory, list(overrides), reason)
    log.error("job %d (%s): %s", idx, " ".join(overrides), reason)
    result = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
    result.return_value = math.nan
    return result


# ---- in the worker process -------------------------------------------------------------------------------------


def worker_main(env: dict, tasks: Any, results: Any, launcher: int) -> None:
    env = {**env, WORKER_ENV[4]: "1" if "tfhydra.runner.job" in sys.modules else "0"}  # from the fork server, or not
    os.environ.update(env)
    if not os.environ["PYTHONPATH"]:
        del os.environ["PYTHONPATH"]  # the launching process had none
    os.setpgrp()  # the terminal's Ctrl-C goes to the launching process, which passes it on once
    import tfhydra.platform.keras_env  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)
    from tfhydra.platform.startup import leave_now, preload_job

    TAGGED.start()  # every line the worker prints carries its job's tag; TensorFlow's start-up noise dropped
    preload_job()  # a no-op when the fork server imported it; otherwise it loads while the first job composes
    _die_with_launcher(launcher)
    try:
        _serve(tasks, results)
    finally:  # what a job keeps is written by now: skip TensorFlow's teardown (about 1 s, tfhydra/platform/startup.py)
        results.close()
        results.join_thread()  # the last message is sent before the process goes
        TAGGED.release()
        leave_now()  # the atexit hooks too: TensorFlow's remove its autograph files from TMPDIR


def _serve(tasks: Any, results: Any) -> None:
    done = 0
    while True:
        try:
            task = tasks.get()
        except (KeyboardInterrupt, EOFError, OSError):
            return
        if task is None:
            return
        done += 1
        os.environ[WORKER_JOB_ENV] = str(done)
        results.put(("start", task[0], os.getpid(), None))
        TAGGED.for_job(task[6] if len(task) > 6 else f"[job {task[0]}]")  # (idx, overrides, ..., tag): launcher.py
        try:
            value = execute_job(*task[:6])
        except (KeyboardInterrupt, SystemExit):  # the job saved its state and recorded `interrupted`
            TAGGED.drain()
            results.put(("stopped", task[0], os.getpid(), None))
            return
        reset_between_jobs()
        TAGGED.drain()  # the job's last lines are out before the launcher hears it is done
        results.put(("done", task[0], os.getpid(), (plain_return(value), done, memory_mb())))
        if done == int(os.environ.get(MAX_JOBS_ENV) or 0):  # recycled: the pool starts a fresh worker in its place
            return


def plain_return(returned: Any) -> Any:
    """The JobReturn as plain values: its configs hold the plugins' structured-config classes, which Hydra's plugin
    scan loaded twice (pickle refuses them); an exception becomes its one line."""
    from omegaconf import OmegaConf

    for name in ("cfg", "hydra_cfg"):
        value = getattr(returned, name, None)
        if value is not None:
            setattr(returned, name, OmegaConf.create(OmegaConf.to_container(value, resolve=False)))
    error = job_return_value(returned)
    if isinstance(error, BaseException):
        set_job_return_value(returned, RuntimeError(f"{type(error).__name__}: {error}"))
    return returned


def memory_mb() -> tuple[float, float]:
    """(resident, peak resident) MB of this process, from /proc (0, 0 where there is none)."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
    except (OSError, KeyError, ValueError):
        return 0.0, 0.0


def _die_with_launcher(launcher: int) -> None:
    """The launching process killed outright (SIGKILL, usually to its whole process group, which the workers left):
    the worker goes the same way at once, as it would have in that group, so that nothing of it is still writing
    when the sweep is run again (a job it was training resumes from its last saved state, as after any SIGKILL).
    A worker's parent is the fork server, which lives on while any worker holds its pipe: so a thread watches the
    launching process itself (a pidfd, which a reused pid cannot fool); Linux's parent-death signal covers the
    fork server's end (it is in the launching process's group)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PDEATHSIG
    except (OSError, AttributeError):
        pass
    threading.Thread(target=_watch_launcher, args=(launcher,), name="tfhydra-watch-launcher", daemon=True).start()


def _watch_launcher(launcher: int) -> None:
    import select

    try:
        pidfd = os.pidfd_open(launcher)
    except ProcessLookupError:
        pidfd = None  # gone already
    except (AttributeError, OSError):  # no pidfd here: poll
        while process_alive(launcher):
            time.sleep(0.2)
        pidfd = None
    if pidfd is not None:
        select.select([pidfd], [], [])  # readable once the process has ended
    os.kill(os.getpid(), signal.SIGKILL)


def execute_job(
    idx: int, overrides: Sequence[str], hydra_context: Any, config: Any, task_function: Any, singleton_state: dict
) -> Any:
    """One job, as Hydra's joblib launcher runs it in its workers (hydra_joblib_launcher/_core.py)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals
    from omegaconf import open_dict

    from tfhydra.platform.private_api import omegaconf_resolvers

    setup_globals()  # Hydra's resolvers (`now`, `hydra`); tfhydra's were registered when the worker imported it
    Singleton.set_state({**singleton_state, "omegaconf_resolvers": omegaconf_resolvers()})
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        config=sweep_config,
        task_function=task_function,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def reset_between_jobs() -> None:
    """What a job leaves in its worker goes before the next: the Keras session (graphs, layer names, the
    global state of tf_keras) and the garbage that refers to it. The job's log handlers are Hydra's to replace."""
    import gc
    import sys

    keras = sys.modules.get("tf_keras")
    if keras is not None:
        keras.backend.clear_session()
    gc.collect()
