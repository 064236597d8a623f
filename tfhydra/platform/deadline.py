"""A call into a server tfhydra does not own, waited on for a bounded time (docs/loggers.md, docs/distribute.md).

A server that stops answering (a tracking server stopped, a socket that accepts and never replies) leaves its
client in a socket read that its own retries may repeat for many minutes; while the main thread sits there, a
SIGTERM whose handler only sets a flag (tfhydra.trainer.state.StopOnSignal during training) is not acted on.
So the call runs in a daemon thread and the caller's thread waits for it in short slices: it gives up when the
deadline passes (`NoAnswer`), or when `pending()` says a signal is waiting to be acted on (`SignalWhileWaiting`).
A signal handler that raises (a second SIGTERM, one outside training, Ctrl-C) raises out of the wait as usual.

The call given up on is left to finish or fail on its own in its thread (a thread cannot be stopped from outside);
the caller must not use what it was using again (the trackers' guard drops that tracker). Daemon: it never holds
the process open at exit. Plain Python, no TensorFlow.

A watchdog thread beside a main thread that sits inside C++ (TensorFlow waiting for the tf.data service, Ray's
`ray.get`) learns of signals through Python's wake-up descriptor (`signal_wakeup`, `signals_in`) and ends the
process itself (`exit_now`): the main thread can neither run a signal handler nor receive an exception there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn, TypeVar

T = TypeVar("T")
SLICE_S = 0.2  # how often the wait looks at `pending`: a signal is acted on within this


class NoAnswer(TimeoutError):
    """The call did not return within its deadline (seconds)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"no answer within {seconds:g} s")


class SignalWhileWaiting(Exception):
    """A signal was taken (its handler set a flag) while the call was waited on: the wait ends so it is acted on."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def within(seconds: float | None, call: Callable[[], T], pending: Callable[[], int | None] = lambda: None) -> T:
    """`call()`'s result (or its exception), waited on for at most `seconds`; None: called here, unbounded."""
    if seconds is None:
        return call()
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001  (handed to the waiting thread, raised there)
            outcome["error"] = error

    worker = threading.Thread(target=run, name="tfhydra-bounded-call", daemon=True)
    worker.start()
    ends = time.monotonic() + seconds
    while worker.is_alive():
        signum = pending()
        if signum is not None:
            raise SignalWhileWaiting(signum)
        left = ends - time.monotonic()
        if left <= 0:
            raise NoAnswer(seconds)
        worker.join(min(SLICE_S, left))
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@contextlib.contextmanager
def signal_wakeup() -> Iterator[socket.socket | None]:
    """A socket the number of every signal this process takes is written to by Python's C-level handler, even while
    the main thread cannot run the Python handler. Set from the main thread only (elsewhere: None); the previous
    wake-up descriptor is given back at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    wakeup, writer = socket.socketpair()
    writer.setblocking(False)
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield wakeup
    finally:
        signal.set_wakeup_fd(previous)
        writer.close()
        wakeup.close()


def signals_in(wakeup: socket.socket, wait: float) -> bytes:
    """The signal numbers written to `wakeup` within `wait` seconds (b"" when none)."""
    readable, _, _ = select.select([wakeup], [], [], wait)
    if not readable:
        return b""
    try:
        return wakeup.recv(64)
    except OSError:
        return b""


def exit_now(line: str, code: int) -> NoReturn:
    """End the process from a watchdog thread: logs and stdout flushed, `line` on stderr, `os._exit(code)` (the only
    way out while the main thread sits in C++: `sys.exit` in a thread ends the thread). The start-up filter of
    descriptor 2 (tfhydra/platform/quiet.py, held while training) is released first: a line written into its pipe
    just before `os._exit` would die with the thread that forwards it (seen: an empty stderr under load)."""
    from tfhydra.platform.quiet import QUIET

    for handler in logging.getLogger("tfhydra").handlers + logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):
        QUIET.release()  # descriptor 2 is the terminal again, everything written so far passed on
    if line:
        os.write(2, f"{line}\n".encode())
    os._exit(code)
