"""A run on the tf.data service never waits forever: a watchdog thread beside training (docs/distribute.md).

TensorFlow's client waits for a batch from the service inside C++ (the iterator's GetNext), retrying a lost
dispatcher or worker without end. While it waits, the main thread runs no Python: no exception can reach it and no
Python signal handler runs, so neither a deadline in the loop nor SIGTERM/Ctrl-C could stop the run. So this
thread, started by the job for a training phase with `data.service.address` set, ends the process itself:

- the dispatcher does not answer (TCP connect and an HTTP/2 SETTINGS frame: `service.probe`) for
  `data.service.timeout` seconds while training, or no training step ends for `data.service.progress_timeout`
  seconds (workers gone while the dispatcher lives): the record says `failed` with the one line, stderr says
  `Error: data.service.address=...: ...`, exit 1;
- SIGTERM or SIGINT during training whose Python handler has not run within `SIGNAL_GRACE_S` (the main thread is
  inside C++), or that was taken but no step boundary came to act on it while the dispatcher does not answer: the
  record says `interrupted`, exit 128 + the signal.

It ends the process with `os._exit`: the only way out while the main thread sits in C++ (`sys.exit` in a thread
ends the thread; an async exception is delivered only when the main thread runs Python again). Nothing is
half-written by it: checkpoints and weight files are written under temporary names and renamed (trainer/state.py),
and the state saved last (at the end of the last finished epoch, or `trainer.save_every`) stays, so the same command
resumes. No TensorFlow here.

The stop object is duck-typed (tfhydra.trainer.state.StopOnSignal; the data room does not import the trainer's):
`training` (bool), `last_step` (time.monotonic() of the last step boundary, or None), `handled` (a Counter of
signals its Python handler took) and `signum` (a signal taken and not yet acted on, or None).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator

from tfhydra.config.errors import ConfigError
from tfhydra.data.service import CONNECT_TIMEOUT_S, dispatcher_host_port, probe
from tfhydra.platform.deadline import exit_now, signal_wakeup, signals_in

log = logging.getLogger("tfhydra")
SIGNAL_GRACE_S = 5  # a Python signal handler runs within milliseconds unless the main thread sits in C++
PROBE_EVERY_S = 3  # how often the dispatcher is asked; a refused connection answers at once
WATCHED = (signal.SIGTERM, signal.SIGINT)
# How the run ends from here: `end(error, interrupted)` writes the record (failed, or interrupted) and returns.
Ending = Callable[[BaseException, bool], None]


class ServiceStalled(ConfigError):
    """The service stopped answering: the key's one line, with what is kept and how to go on."""

    def __init__(self, address: str, problem: str):
        super().__init__(
            "data.service.address",
            address,
            "a tf.data service whose dispatcher and workers keep "
            "running for the whole training (python -m tfhydra.data.service)",
            f"{problem}; the state saved last is kept: the same command resumes once the service is back",
        )


class InterruptedWaiting(KeyboardInterrupt):
    """A signal the main thread could not act on: recorded `interrupted` like tfhydra.trainer.state.Interrupted."""

    def __init__(self, signum: int):
        self.signum = signum
        self.reason = (
            f"interrupted by {signal.Signals(signum).name} while training waited inside TensorFlow for the "
            f"tf.data service; the state saved last is kept: the same command resumes"
        )
        super().__init__(self.reason)


class ServiceWatch(threading.Thread):
    def __init__(self, address: str, cfg_service, stop, end: Ending, wakeup: socket.socket | None):
        super().__init__(name="tfhydra-service-watch", daemon=True)
        self.address, self.stop, self.end, self.wakeup = address, stop, end, wakeup
        self.host, self.port = dispatcher_host_port(address)
        self.timeout, self.progress_timeout = float(cfg_service.timeout), float(cfg_service.progress_timeout)
        self.finished = threading.Event()
        self.seen: collections.Counter = collections.Counter()
        self.signalled: tuple[int, float] | None = None  # (signum, when) of the oldest signal not yet acted on
        self.training_since: float | None = None
        self.silent_since: float | None = None
        self.next_probe = 0.0

    def run(self) -> None:
        while not self.finished.is_set():
            self._read_signals(0.5)
            now = time.monotonic()
            self._check_signal(now)
            if getattr(self.stop, "training", False):
                self._check_training(now)
            else:
                self.training_since = self.silent_since = None

    def _read_signals(self, wait: float) -> None:
        if self.wakeup is None:
            self.finished.wait(wait)
            return
        for signum in signals_in(self.wakeup, wait):
            if signum in WATCHED:
                self.seen[signum] += 1
                self.signalled = self.signalled or (signum, time.monotonic())

    def _check_signal(self, now: float) -> None:
        if not getattr(self.stop, "training", False):  # only training waits on the service; elsewhere a long C++
            self.signalled = None  # call (an export) ends, and the handler stops the run
            return
        if self.signalled is None or now - self.signalled[1] < SIGNAL_GRACE_S:
            return
        signum = self.signalled[0]
        unhandled = any(self.stop.handled[s] < n for s, n in self.seen.items())
        # Taken but not yet acted on (no step boundary since): a long validation or epoch end reaches the boundary
        # in time; a wait on the service does not, if the dispatcher is gone (workers gone: the progress deadline).
        pending = getattr(self.stop, "signum", None) is not None and self.silent_since is not None
        if unhandled or pending:
            self._finish(InterruptedWaiting(signum), 128 + signum)
        if not getattr(self.stop, "signum", None):
            self.signalled = None  # the main thread acted on it: it stops the run itself

    def _check_training(self, now: float) -> None:
        self.training_since = self.training_since or now
        last = max(self.stop.last_step or 0.0, self.training_since)
        if now - last >= self.progress_timeout:
            why = (
                "the dispatcher answers; are its workers running?"
                if self.silent_since is None
                else "nor does the dispatcher answer"
            )
            self._finish(
                ServiceStalled(
                    self.address,
                    f"no training step ended for {now - last:.0f} s ({why}); "
                    f"data.service.progress_timeout={self.progress_timeout:g}",
                ),
                1,
            )
        if now < self.next_probe:
            return
        problem = probe(self.host, self.port, timeout=min(CONNECT_TIMEOUT_S, self.timeout))
        now = time.monotonic()
        self.next_probe = now + PROBE_EVERY_S
        if problem is None:
            self.silent_since = None
            return
        self.silent_since = self.silent_since or now
        if now - self.silent_since >= self.timeout:
            self._finish(
                ServiceStalled(
                    self.address,
                    f"the dispatcher has not answered for {now - self.silent_since:.0f}"
                    f" s ({problem}); data.service.timeout={self.timeout:g}",
                ),
                1,
            )

    def _finish(self, error: ServiceStalled | InterruptedWaiting, code: int) -> None:
        """Record, say it in one line, end the process (os._exit: see the module's docstring)."""
        interrupted = isinstance(error, KeyboardInterrupt)
        line = f"Stopped: {error.reason}" if isinstance(error, InterruptedWaiting) else f"Error: {error}"
        try:
            log.error("%s", line)
            self.end(error, interrupted)
        except BaseException as failed:  # noqa: BLE001  (the process ends whatever happens; the line below says why)
            log.warning("the record could not be written: %s", failed)
        finally:
            exit_now(line, code)


@contextlib.contextmanager
def watch_service(cfg_service, stop, end: Ending) -> Iterator[ServiceWatch | None]:
    """While the block runs (a training phase), the watchdog runs if `data.service.address` is set. From the main
    thread it also takes Python's signal wake-up descriptor (the previous one is given back), through which it learns
    of a signal even while the main thread cannot run its handler."""
    address = cfg_service.get("address") if cfg_service is not None else None
    if not address:
        yield None
        return
    with signal_wakeup() as wakeup:
        watch = ServiceWatch(address, cfg_service, stop, end, wakeup)
        watch.start()
        try:
            yield watch
        finally:
            watch.finished.set()
            watch.join(timeout=CONNECT_TIMEOUT_S + 1)
