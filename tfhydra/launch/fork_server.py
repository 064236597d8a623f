"""The process tfhydra's launcher forks its workers from: multiprocessing's `forkserver`, which imports
TensorFlow, tf_keras and tfhydra's rooms once (`PRELOAD`) and then forks one worker per request.

Why a fork server and not `spawn`: a spawned worker imports TensorFlow itself, about 4 s of CPU each (measured:
18.0 against 13.5 CPU seconds per worker for a 3-job sweep of the seed CNN on 2 cores), and the workers of a
sweep do it at the same moment. Why not a plain `fork` of the launching process: that process never imports
TensorFlow (a config error is answered without it), and a fork of a process whose TensorFlow runtime has
started (devices, thread pools) deadlocks. The server only imports: its runtime never starts, so each fork
sets its own threads and devices as a fresh process does (tfhydra/launch/placement.py's environment is read when
the runtime starts, not at import).

The server imports what the launching process would: it is started with the launcher's `sys.path` as its
PYTHONPATH (a `python -c` server would otherwise look in its working directory first, and a checkout other than
the launcher's could answer), and each worker gets the launcher's own PYTHONPATH back (`worker_environment`).
`start_fork_server` is called as soon as a sweep's pre-flight has passed, so the import runs beside Hydra's
composition of the sweep; the pool calls it again (a no-op when the server runs).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

PRELOAD = ["tfhydra.launch.preload"]  # TensorFlow, tf_keras and every room, imported once and silently
# A Unix socket's path holds at most 107 bytes on Linux; the server's is <tempdir>/pymp-XXXXXXXX/listener-XXXXXXXX.
_SOCKET_PATH_ROOM = 107 - len("/pymp-xxxxxxxx/listener-xxxxxxxx")


def worker_context() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def start_fork_server() -> Any:
    """The server running (started now when it is not), with the launcher's import path; returns the context."""
    from multiprocessing import forkserver

    context = worker_context()
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    try:
        with _short_temp_dir():
            forkserver.ensure_running()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return context


@contextlib.contextmanager
def _short_temp_dir() -> Iterator[None]:
    """While the server starts, Python's temporary directory is /tmp when $TMPDIR is too long for the server's
    socket (`AF_UNIX path too long` otherwise; Python 3.13 falls back the same way). multiprocessing keeps the
    directory it makes then (pymp-*) for the process's life and removes it at exit."""
    saved = tempfile.tempdir
    if len(os.fsencode(tempfile.gettempdir())) > _SOCKET_PATH_ROOM and os.access("/tmp", os.W_OK):
        tempfile.tempdir = "/tmp"
    try:
        yield
    finally:
        tempfile.tempdir = saved


def worker_environment(placement: dict) -> dict:
    """What a worker sets first: its placement, and the launching process's PYTHONPATH instead of the server's."""
    return {**placement, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
