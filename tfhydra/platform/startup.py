"""The training process around the job: TensorFlow imported while Hydra works, and a fast exit after success.

Both are about the process, not the run: tfhydra/__main__.py's entry point (through the pre-flight) starts
the preload, and `end_process` ends a command that succeeded (docs/performance.md has the measurements).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading


def end_process() -> None:
    """Leave at once after a command that succeeded: everything the run keeps is written, closed and renamed
    into place by then, and a process that imported TensorFlow otherwise spends about a second tearing its
    objects down (measured: docs/performance.md). The atexit hooks still run (TensorFlow's remove its
    autograph temporary files, a user's hooks flush), then logs and streams are flushed, and the
    interpreter's own teardown is skipped. `TFHYDRA_FAST_EXIT=0` keeps Python's normal shutdown."""
    if os.environ.get("TFHYDRA_FAST_EXIT", "1") == "0" or "tensorflow" not in sys.modules:
        return
    leave_now()


def leave_now() -> None:
    """Exit 0 without the interpreter's teardown: the atexit hooks, the logs and the standard streams first.
    Shared by a succeeded command and a sweep worker that has sent its last result."""
    import atexit

    atexit._run_exitfuncs()  # noqa: SLF001  (CPython's own entry point: what its shutdown runs first)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say anyway
            pass
    os._exit(0)


def preload_job(module: str) -> threading.Thread:
    """Import `module`, the job (the callers up the layers name tfhydra.runner.job: TensorFlow and every room, about
    2 s), in a background thread while Hydra composes the config again and makes the run directory (about 0.4 s),
    once the pre-flight has passed and a job will run. The ground floor names no room above it: the caller does.

    The import releases the GIL while it loads TensorFlow's shared libraries and reads files, so the two
    overlap on a machine with two cores (docs/performance.md). The job's own import of the module (`tfhydra.run`'s)
    then waits on the import lock until this one is done. A failure here is left for that import to
    report. Not for sweeps: their launching process never needs TensorFlow (jobs may run elsewhere).
    """

    def load() -> None:
        try:
            importlib.import_module(module)
        except BaseException:  # noqa: BLE001  (tfhydra.run imports it again and reports the error)
            pass

    thread = threading.Thread(target=load, name="tfhydra-preload", daemon=True)
    thread.start()
    return thread
