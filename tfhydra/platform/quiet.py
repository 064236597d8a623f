"""TensorFlow's noise held back from the console, for the whole process, and kept in the run's train.log.

TensorFlow's C++ runtime writes lines to file descriptor 2 that say nothing to a user (the oneDNN notice, twice;
CUDA probing and a `cuInit` error on a machine without a GPU; the CPU-instructions notice; oneDNN's fall-back notice
for float16 or int64 kernels, an `E0000` line on a run that is fine), some before its own log level is read and some
in the middle of training, so `TF_CPP_MIN_LOG_LEVEL` cannot silence them. `QuietStart` puts a pipe in front of
descriptor 2 for the command's whole life and passes on every line but those (`NOISE`); Python's own `sys.stderr`
(tfhydra's lines, the bar, a traceback) keeps writing to the terminal directly. TensorFlow's deprecation warnings
from its Python logger (a tf_keras layer calling `colocate_with`) are held back too. What is held back is kept:
`keep_in(train.log)` appends it there. A sweep worker of tfhydra's launcher has `TaggedLines` instead: the same
filter, and each line tagged with its job. `TFHYDRA_QUIET=0` shows everything (`TFHYDRA_QUIET_START=0`, the earlier
name, still works; docs/terminal.md). This module imports nothing heavy, so the command starts the filter before
TensorFlow loads.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from pathlib import Path
from typing import TextIO

NOISE = [
    re.compile(p)
    for p in (
        r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
        r"oneDNN custom operations are on",
        r"cpu_feature_guard\.cc.*This TensorFlow binary is optimized",
        r"^To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags",
        r"cudart_stub\.cc.*Could not find cuda drivers on your machine",
        r"Unable to register cu(DNN|FFT|BLAS) factory",
        r"computation placer already registered",
        r"TF-TRT Warning: Could not find TensorRT",
        r"Created TensorFlow Lite XNNPACK delegate for CPU",  # LiteRT's interpreter, once per file it loads
        r"oneDNN supports DT_\w+ only on platforms with",  # precision=mixed (DT_HALF), keras=3 (DT_INT64) on a CPU
    )
]
NO_GPU_NOISE = re.compile(
    r"cuda_(platform|executor|diagnostics)\.cc|failed call to cuInit|kernel driver does not "
    r"appear to be running|no NVIDIA GPU device is present"
)
ENV = "TFHYDRA_QUIET"
OLD_ENV = "TFHYDRA_QUIET_START"  # its earlier name, read when TFHYDRA_QUIET is not set
HELD_LINES = 2000  # what train.log keeps of the held-back lines of one process; the rest are counted


def quiet_wanted() -> bool:
    """`TFHYDRA_QUIET=0` (or the earlier `TFHYDRA_QUIET_START=0`) shows TensorFlow's lines as they come."""
    return os.environ.get(ENV, os.environ.get(OLD_ENV, "1")) != "0"


def is_noise(line: str, gpu_machine: bool) -> bool:
    return any(p.search(line) for p in NOISE) or (not gpu_machine and bool(NO_GPU_NOISE.search(line)))


class HeldBack:
    """The lines a filter held back, bounded, appended to a run's train.log once `keep_in` names it."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.dropped = 0
        self.path: Path | None = None
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        with self._lock:
            if self.path is not None:
                self._write([line])
            elif len(self.lines) < HELD_LINES:
                self.lines.append(line)
            else:
                self.dropped += 1

    def keep_in(self, path: Path) -> None:
        with self._lock:
            self.path = path
            held, self.lines = self.lines, []
            if self.dropped:
                held.append(f"... and {self.dropped} more lines held back before this run started")
                self.dropped = 0
            self._write(held)

    def _write(self, lines: list[str]) -> None:
        if not lines or self.path is None:
            return
        try:
            with open(self.path, "a", encoding="utf-8") as log_file:
                log_file.writelines(f"[held back from the console] {line}\n" for line in lines)
        except OSError:
            pass  # the run directory is gone or not writable: the console's silence is not worth a failure


HELD = HeldBack()


def keep_in(train_log: Path) -> None:
    """The run's log: what the filter held back so far, and from now on, is appended there."""
    HELD.keep_in(train_log)


class _Deprecations(logging.Filter):
    """TensorFlow's Python-side deprecation warnings (`... is deprecated and will be removed ...`), held back."""

    def filter(self, record: logging.LogRecord) -> bool:
        if os.path.basename(record.pathname) == "deprecation.py" or "is deprecated and will be removed" in str(
            record.msg
        ):
            try:
                HELD.add(record.getMessage().replace("\n", " "))
            except (TypeError, ValueError):  # a record whose arguments do not format: drop it as before
                pass
            return False
        return True


DEPRECATIONS = _Deprecations()


class QuietStart:
    """File descriptor 2 through a filter thread until `release()` (the process ends); Python's `sys.stderr` goes
    to the terminal directly meanwhile, so only what the C++ runtime writes passes the filter."""

    def __init__(self) -> None:
        self._saved: int | None = None
        self._thread: threading.Thread | None = None
        self._stream: TextIO | None = None  # the sys.stderr replaced while the filter holds descriptor 2
        self.gpu_machine = any(Path("/dev").glob("nvidia[0-9]*"))

    def start(self) -> QuietStart:
        if not quiet_wanted() or self._saved is not None:
            return self
        sys.stderr.flush()
        read, write = os.pipe()
        self._saved = os.dup(2)
        os.dup2(write, 2)
        os.close(write)
        self._thread = threading.Thread(target=self._forward, args=(read,), name="tfhydra-quiet", daemon=True)
        self._thread.start()
        if _on_descriptor_2(sys.stderr):  # not a notebook's stream: Python's lines bypass the filter
            self._stream = sys.stderr
            sys.stderr = open(  # noqa: SIM115 (closed by release)
                os.dup(self._saved), "w", buffering=1, encoding="utf-8", errors="backslashreplace"
            )
        logging.getLogger("tensorflow").addFilter(DEPRECATIONS)
        return self

    def _forward(self, read: int) -> None:
        saved = self._saved
        assert saved is not None  # start() keeps the original descriptor 2 before the thread starts
        with os.fdopen(read, "rb", buffering=0) as source:
            pending = b""
            while chunk := source.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                kept = [line for line in lines if not self._held(line)]
                if kept:
                    os.write(saved, b"\n".join(kept) + b"\n")
            if pending and not self._held(pending):
                os.write(saved, pending)

    def _held(self, line: bytes) -> bool:
        text = line.decode("utf-8", "replace")
        if is_noise(text, self.gpu_machine):
            HELD.add(text)
            return True
        return False

    def release(self) -> None:
        """Descriptor 2 and `sys.stderr` back to what they were, once everything written so far is passed on."""
        if self._saved is None:
            return
        logging.getLogger("tensorflow").removeFilter(DEPRECATIONS)
        if self._stream is not None:
            replaced, sys.stderr, self._stream = sys.stderr, self._stream, None
            follow_stderr(replaced, sys.stderr)
            try:
                replaced.close()
            except (OSError, ValueError):
                pass
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self._saved, 2)  # the pipe's last write end closes: the thread reads to the end and stops
        if self._thread is not None:
            self._thread.join(timeout=5)
        os.close(self._saved)
        self._saved, self._thread = None, None


def follow_stderr(replaced: TextIO, restored: TextIO) -> None:
    """Every logging handler made while `replaced` was sys.stderr (TensorFlow's logger makes its StreamHandler on
    its first line, on the sys.stderr of that moment) writes to `restored` from now on: a second run in the same
    process would otherwise print `--- Logging error ---` for each of TensorFlow's lines (a closed file)."""
    loggers = [
        logging.getLogger(),
        *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    for handler in (h for logger in loggers for h in logger.handlers):
        if isinstance(handler, logging.StreamHandler) and handler.stream is replaced:
            handler.setStream(restored)


def _on_descriptor_2(stream) -> bool:
    try:
        return stream.fileno() == 2
    except (AttributeError, OSError, ValueError):  # a notebook's stream, a test's capture
        return False


class TaggedLines:
    """A sweep worker's descriptors 1 and 2 through filter threads for the worker's whole life: every line starts
    with the tag of the job it runs (`[job 1 lr=0.001]`, `for_job` in tfhydra/launch/worker_process.py), so the lines
    of jobs running at once can be told apart, and TensorFlow's start-up noise (`NOISE`, the CUDA probe on a machine
    without a GPU) is held back as in a single run (`TFHYDRA_QUIET=0` shows it)."""

    MARK = b"\0tfhydra-drained\0"  # written by `drain`, never passed on

    def __init__(self) -> None:
        self.tag = ""
        self.gpu_machine = any(Path("/dev").glob("nvidia[0-9]*"))
        self._saved: list[tuple[int, int]] = []  # (descriptor, its original copy)
        self._threads: list[threading.Thread] = []
        self._drained: list[threading.Event] = []  # set when a thread has passed on everything before `MARK`

    def start(self) -> TaggedLines:
        if self._saved:
            return self
        for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
            stream.flush()
            read, write = os.pipe()
            saved = os.dup(fd)
            os.dup2(write, fd)
            os.close(write)
            self._saved.append((fd, saved))
            self._drained.append(threading.Event())
            thread = threading.Thread(
                target=self._forward, args=(read, saved, self._drained[-1]), name=f"tfhydra-tag-{fd}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        for stream in (sys.stdout, sys.stderr):  # a pipe now: each line goes out when it ends, as on a terminal
            if hasattr(stream, "reconfigure"):
                stream.reconfigure(line_buffering=True)
        return self

    def _forward(self, read: int, target: int, drained: threading.Event) -> None:
        quiet = quiet_wanted()
        with os.fdopen(read, "rb", buffering=0) as source:
            pending = b""
            while chunk := source.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                kept, marked = [], False
                for line in lines:
                    if line.endswith(self.MARK):
                        marked, line = True, line[: -len(self.MARK)]
                        if not line:
                            continue
                    text = line.decode("utf-8", "replace")
                    if quiet and is_noise(text, self.gpu_machine):
                        HELD.add(text)
                    else:
                        kept.append(self._tagged(line))
                if kept:
                    os.write(target, b"".join(line + b"\n" for line in kept))
                if marked:
                    drained.set()
            if pending:
                os.write(target, self._tagged(pending))

    def for_job(self, tag: str) -> None:
        """The lines written from now on carry `tag`; those written before keep the tag they were written under."""
        self.drain()
        self.tag = tag

    def drain(self, timeout: float = 5) -> None:
        """Return once every line written so far is out: a job's last lines come before the launcher's next ones
        (the sweep's summary is printed once the job says it is done)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for (fd, _), drained in zip(self._saved, self._drained, strict=True):
            drained.clear()
            os.write(fd, self.MARK + b"\n")
        for drained in self._drained:
            drained.wait(timeout)

    def _tagged(self, line: bytes) -> bytes:
        return f"{self.tag} ".encode() + line if self.tag and line.strip() else line

    def release(self) -> None:
        """The descriptors back, once every line written so far is out (the worker ends with os._exit)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for fd, saved in self._saved:
            os.dup2(saved, fd)  # the pipe's last write end closes: its thread reads to the end and stops
        for thread in self._threads:
            thread.join(timeout=5)
        for _, saved in self._saved:
            os.close(saved)
        self._saved, self._threads, self._drained = [], [], []


QUIET = QuietStart()  # a single run's: started by tfhydra/__main__.py (and evaluate, predict), released at the end
