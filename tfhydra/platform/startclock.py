"""When the wait began, and where it went: the clock behind `time_to_first_step_seconds` and `startup`.

A user waits from the moment the shell starts the command, not from when training code starts a timer: the
interpreter, imports, Hydra, the pre-flight, TensorFlow's import, the data and the model all come first. So the
origin of a command-line run is the process's own start, read from the kernel (/proc/self/stat's start time
against /proc/uptime: 10 ms ticks), and the phases are marked as the run passes them. A run that is not the
first thing its process does (a sweep job in a reused worker, a notebook's `tfhydra.train`) measures from when
its job started instead, and says so (`origin`). Ground floor: no TensorFlow, no room.
"""

from __future__ import annotations

import os
import time

PHASES = ("python_and_hydra", "preflight", "tensorflow_import", "data", "model", "first_step")
_ENDS = {
    "python_and_hydra": "main",
    "preflight": "preflight",
    "tensorflow_import": "tensorflow",
    "data": "data",
    "model": "model",
}  # phase -> the mark that ends it (first_step ends at the first step itself)
_marks: dict[str, float] = {}


def _process_start() -> float | None:
    """Unix time this process started, from the kernel; None where /proc does not say."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as uptime:
            up = float(uptime.read().split()[0])
        started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat; 19 after the name
        return time.time() - (up - started_after_boot)
    except (OSError, ValueError, IndexError):
        return None


PROCESS_START = _process_start()


def mark(name: str) -> None:
    """The run reached `name` (the first time counts)."""
    _marks.setdefault(name, time.time())


def start_job() -> None:
    """A job begins: from a command's first job, the wait is counted from the process start; for any other
    (a second job in this process, a job outside the command line) from now."""
    if "job" in _marks or "main" not in _marks or PROCESS_START is None:
        _marks.clear()
        _marks["origin"] = time.time()
        _marks["job"] = _marks["origin"]
    else:
        _marks["origin"], _marks["job"] = PROCESS_START, time.time()


def origin() -> float:
    """When the wait this job's user sees began (Unix time): the process start for a command's first job, else
    the job's start; now, before any job started."""
    return _marks.get("origin", time.time())


def startup(first_step_unix: float | None) -> dict | None:
    """{origin, seconds, <phase>: seconds ...}: the wait until the first step and its parts, which add up to it
    (a phase this run did not pass through, e.g. the pre-flight of a notebook call, is 0)."""
    origin = _marks.get("origin")
    if origin is None or first_step_unix is None:
        return None
    parts, previous = {}, origin
    for phase in PHASES:
        end = first_step_unix if phase == "first_step" else _marks.get(_ENDS[phase])
        if end is None or end < previous:
            parts[phase] = 0.0
            continue
        parts[phase], previous = end - previous, end
    return {"origin": "process" if origin == PROCESS_START else "job", "seconds": first_step_unix - origin, **parts}
