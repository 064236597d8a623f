"""What a person at a terminal sees: TensorFlow's start-up noise held back, a live bar while an epoch trains.

TensorFlow's C++ runtime writes lines to file descriptor 2 that say nothing to a user (the oneDNN notice,
twice; CUDA probing and a `cuInit` error on a machine without a GPU; the CPU-instructions notice), some before
its own log level is read, so `TF_CPP_MIN_LOG_LEVEL` cannot silence them. `QuietStart` puts a pipe in front
of descriptor 2 from the command's start until training begins, and passes on every line but those
(`NOISE`); warnings and errors still show. `TFHYDRA_QUIET_START=0` shows everything (docs/terminal.md).

The live bar while an epoch trains is tfhydra/trainer/callbacks.py's `EpochProgress` (it needs Keras; this
module imports nothing heavy, so the command can start the filter before TensorFlow loads).
"""
from __future__ import annotations

import os
import re
import sys
import threading
from pathlib import Path

NOISE = [re.compile(p) for p in (
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"oneDNN custom operations are on",
    r"cpu_feature_guard\.cc.*This TensorFlow binary is optimized",
    r"^To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags",
    r"cudart_stub\.cc.*Could not find cuda drivers on your machine",
    r"Unable to register cu(DNN|FFT|BLAS) factory",
    r"computation placer already registered",
    r"TF-TRT Warning: Could not find TensorRT",
)]
NO_GPU_NOISE = re.compile(r"cuda_(platform|executor|diagnostics)\.cc|failed call to cuInit|kernel driver does not "
                          r"appear to be running|no NVIDIA GPU device is present")
ENV = "TFHYDRA_QUIET_START"


def is_noise(line: str, gpu_machine: bool) -> bool:
    return any(p.search(line) for p in NOISE) or (not gpu_machine and bool(NO_GPU_NOISE.search(line)))


class QuietStart:
    """File descriptor 2 through a filter thread until `release()` (training starts, or the process ends)."""

    def __init__(self) -> None:
        self._saved: int | None = None
        self._thread: threading.Thread | None = None
        self.gpu_machine = any(Path("/dev").glob("nvidia[0-9]*"))

    def start(self) -> "QuietStart":
        if os.environ.get(ENV, "1") == "0" or self._saved is not None:
            return self
        sys.stderr.flush()
        read, write = os.pipe()
        self._saved = os.dup(2)
        os.dup2(write, 2)
        os.close(write)
        self._thread = threading.Thread(target=self._forward, args=(read,), name="tfhydra-quiet-start", daemon=True)
        self._thread.start()
        return self

    def _forward(self, read: int) -> None:
        with os.fdopen(read, "rb", buffering=0) as source:
            pending = b""
            while chunk := source.read(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                kept = [line for line in lines if not is_noise(line.decode("utf-8", "replace"), self.gpu_machine)]
                if kept:
                    os.write(self._saved, b"\n".join(kept) + b"\n")
            if pending and not is_noise(pending.decode("utf-8", "replace"), self.gpu_machine):
                os.write(self._saved, pending)

    def release(self) -> None:
        """Descriptor 2 back to what it was, once everything written so far has been passed on."""
        if self._saved is None:
            return
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self._saved, 2)  # the pipe's last write end closes: the thread reads to the end and stops
        if self._thread is not None:
            self._thread.join(timeout=5)
        os.close(self._saved)
        self._saved, self._thread = None, None


QUIET = QuietStart()  # a single run's: started by tfhydra/__main__.py, released when training starts and at the end


def on_terminal() -> bool:
    """Whether a person watches stderr (a terminal that can redraw a line in place)."""
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


SIGNIFICANT_DIGITS = 4


def figure(value) -> str:
    """A measured figure as every line and summary shows it: 4 significant digits (`0.9833`, `0.001`, `2.3e-05`),
    so a loss near zero keeps its digits and an accuracy is not printed to float32's noise
    (`0.9833333492279053`). Integers and non-numbers as they are, NaN/inf as `nan`/`inf`. The record keeps full
    precision; this is only how a person reads it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, int):
        return str(value)
    return f"{value:.{SIGNIFICANT_DIGITS}g}"
