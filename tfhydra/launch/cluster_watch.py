"""A sweep waiting on a cluster never waits forever (docs/distribute.md, "When the cluster stops answering").

Hydra's Ray launcher waits for its jobs in `ray.get`, inside Ray's C++ client: a head that stops answering (its
processes stopped, a hung machine) is waited on for good (measured: no end after 100 s with the head SIGSTOPped),
no Python signal handler runs meanwhile, and SIGTERM is Ray's own handler's: a C++ stack dump and an abort.
submitit's SLURM launcher polls `squeue`/`sacct`, which wait on a controller that does not answer. So while a
cluster launcher launches a batch, `watching` runs this thread beside it; every PROBE_EVERY_S it asks the cluster:

- the Ray head at `hydra.launcher.ray.init.address` (host:port, or ray://host:port): its gRPC port must answer
  HTTP/2 (tfhydra/platform/grpc_probe.py); `auto` or no address (a Ray runtime of the sweep's own) is not watched;
- the SLURM controller: `scontrol ping` must say UP within PROBE_TIMEOUT_S.

Silent for `sweep.cluster_timeout` seconds: `on_silence(problem)` (the batch's unfinished jobs recorded lost, the
summary, one `Error:` line: tfhydra/launch/lost_jobs.py). SIGTERM/SIGINT while the batch runs: `on_signal(signum)`.
Either way the process then ends from here (tfhydra.platform.deadline.exit_now): the main thread sits in C++ or in a
subprocess's wait. No TensorFlow.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tfhydra.platform.deadline import exit_now, signal_wakeup, signals_in
from tfhydra.platform.grpc_probe import grpc_problem
from tfhydra.sweep.kind import launcher_kind

log = logging.getLogger("tfhydra")
PROBE_EVERY_S = 3  # how often the cluster is asked
PROBE_TIMEOUT_S = 3  # how long one question may take (a hung server: the connect succeeds, no answer comes)
LEFT_GRACE_S = 10  # SLURM: every job ended, one interrupted, none queued for this long: submitit waits for good
TIMEOUT_KEY = "sweep.cluster_timeout"
WATCHED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True)
class Cluster:
    """What a launcher's jobs wait on, and how to ask it whether it answers."""

    name: str  # "the Ray head at hydra.launcher.ray.init.address=127.0.0.1:6379"
    ask: Callable[[], str | None]  # None: it answers; else why not, in words
    jobs_end_with_us: bool  # Ray ends a driver's tasks with it; SLURM's jobs run on without the launching process
    then: str  # what becomes of the jobs, and how the sweep goes on, said after the silence
    connect: Callable[[Any], None] | None = None  # the launcher's own client started, before its launch (Ray's)
    queued: Callable[[list[dict]], bool] | None = None  # does the queue hold these jobs (SLURM's, without sacct)


def watched_cluster(config: DictConfig) -> Cluster | None:
    """The cluster the sweep's launcher waits on, None for a launcher that waits on nothing but this machine."""
    kind = launcher_kind(config)
    if kind == "ray":
        address = OmegaConf.select(config, "hydra.launcher.ray.init.address", default=None)
        host, _, port = str(address or "").split("://", 1)[-1].rpartition(":")
        if not host or not port.isdigit():
            return None
        return Cluster(
            f"the Ray head at hydra.launcher.ray.init.address={address}",
            partial(grpc_problem, host.strip("[]"), int(port), PROBE_TIMEOUT_S, "it does not answer as a Ray head"),
            jobs_end_with_us=True,
            then="the state each job saved last is kept: the same command continues the sweep",
            connect=connect_ray,
        )
    if kind == "submitit_slurm":
        return Cluster(
            "the SLURM controller (scontrol ping)",
            slurm_controller_silence,
            jobs_end_with_us=False,
            then="its jobs may still run on their nodes (squeue shows them once it answers): the same command "
            "continues the sweep once they have ended",
            queued=slurm_still_queued,
        )
    return None


def connect_ray(launcher: Any) -> None:
    """hydra-ray-launcher's own `start_ray` with its own `init` config, called before its launch (which then finds
    Ray running and goes on): `ray.init` replaces SIGTERM's handler with Ray's (a C++ stack dump, an abort), so
    the watch's handlers are set again after it."""
    from hydra_plugins.hydra_ray_launcher._launcher_util import start_ray

    start_ray(launcher.ray_cfg.init)


def slurm_controller_silence() -> str | None:
    """`scontrol ping` (it reads the cluster from slurm.conf or $SLURM_CONF): `Slurmctld(primary) at <host> is UP`."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return "scontrol is not on PATH"
    try:
        done = subprocess.run([scontrol, "ping"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"scontrol ping gave no answer within {PROBE_TIMEOUT_S} s"
    said = " ".join((done.stdout + done.stderr).split())
    return None if done.returncode == 0 and " is UP" in said else f"scontrol ping: {said or done.returncode}"


def slurm_still_queued(places: list[dict]) -> bool:
    """Does SLURM's queue still hold one of these jobs (records' `scheduler`: job_id, array_job_id, array_task_id)?
    A requeued job (pre-empted, at its time limit) is back in the queue under the same ids."""
    try:
        done = subprocess.run(["squeue", "-h", "-o", "%A %i"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return True  # not known: as if queued
    if done.returncode != 0:
        return True
    queued = set(done.stdout.split())
    ids = {str(p.get("job_id")) for p in places} | {f"{p.get('array_job_id')}_{p.get('array_task_id')}" for p in places}
    return bool(ids & queued)


class ClusterWatch(threading.Thread):
    """`batch` (tfhydra/launch/lost_jobs.py: Batch) records and ends the sweep: `end_silent(said)`,
    `end_stopped(signum, jobs_end_with_us)`, and for SLURM `ended_places()` / `end_waiting()` (below)."""

    def __init__(self, cluster: Cluster, timeout: float, wakeup, batch: Any):
        super().__init__(name="tfhydra-cluster-watch", daemon=True)
        self.cluster, self.timeout, self.wakeup, self.batch = cluster, timeout, wakeup, batch
        self.finished = threading.Event()
        self.silent_since: float | None = None
        self.left_since: float | None = None

    def run(self) -> None:
        next_probe = time.monotonic()
        while not self.finished.is_set():
            if self.wakeup is None:
                self.finished.wait(0.5)
            else:
                taken = [s for s in signals_in(self.wakeup, 0.5) if s in WATCHED_SIGNALS]
                if taken and not self.finished.is_set():
                    self._end(partial(self.batch.end_stopped, taken[0], self.cluster.jobs_end_with_us), 128 + taken[0])
            if time.monotonic() >= next_probe:
                next_probe = time.monotonic() + PROBE_EVERY_S
                self._probe()

    def _probe(self) -> None:
        asked = time.monotonic()  # silent since the first question that got no answer was asked
        problem = self.cluster.ask()
        now = time.monotonic()
        if problem is None:
            self.silent_since = None
            self._check_left(now)
            return
        self.silent_since = self.silent_since or asked
        if now - self.silent_since >= self.timeout and not self.finished.is_set():
            said = (
                f"{self.cluster.name} has not answered for {now - self.silent_since:.0f} s ({problem}); "
                f"{TIMEOUT_KEY}={self.timeout:g}; {self.cluster.then}"
            )
            self._end(partial(self.batch.end_silent, said), 1)

    def _check_left(self, now: float) -> None:
        """SLURM without accounting: submitit learns that a job ended without a result (cancelled, its record says
        `interrupted`) only from `sacct`, and waits for it for good. Every job of the batch has recorded its end,
        one was interrupted, and SLURM's queue holds none of them (a requeued job is back in it) for LEFT_GRACE_S:
        the sweep ends as submitit's error would end it with accounting (the summary, one line)."""
        queued = self.cluster.queued
        places = self.batch.ended_places() if queued is not None else None
        if queued is None or places is None or queued(places):
            self.left_since = None
            return
        self.left_since = self.left_since or now
        if now - self.left_since >= LEFT_GRACE_S and not self.finished.is_set():
            self._end(self.batch.end_waiting, 1)

    def _end(self, ending: Callable[[], None], code: int) -> None:
        """Record and say it (the ending prints its one line and raises SystemExit), then end the process."""
        line = ""
        try:
            ending()
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else code
        except BaseException as failed:  # noqa: BLE001  (the process ends whatever happens; the line says why)
            line = f"Error: the sweep's records could not be written: {type(failed).__name__}: {failed}"
            log.exception("ending the sweep")
        exit_now(line, code)


@contextlib.contextmanager
def watching(config: DictConfig, launcher: Any, batch: Any) -> Iterator[None]:
    """While the block runs (`launcher`'s launch of one batch), its cluster is watched and SIGTERM/SIGINT end the
    sweep from the watch (Python's handlers do nothing; the watch reads the wake-up descriptor). The signals'
    previous handlers are given back at the end."""
    cluster = watched_cluster(config)
    if cluster is None:
        yield
        return
    with signal_wakeup() as wakeup:
        watch = ClusterWatch(cluster, float(OmegaConf.select(config, TIMEOUT_KEY)), wakeup, batch)
        previous = {s: signal.getsignal(s) for s in WATCHED_SIGNALS} if wakeup is not None else {}
        quiet_handlers(previous)
        watch.start()
        try:
            if cluster.connect is not None:
                cluster.connect(launcher)
                quiet_handlers(previous)
            yield
        finally:
            watch.finished.set()
            watch.join(timeout=PROBE_TIMEOUT_S + 1)
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def quiet_handlers(signals) -> None:
    for signum in signals:
        signal.signal(signum, lambda number, frame: None)
