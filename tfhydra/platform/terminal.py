"""What a person at a terminal sees: short console lines, a live bar while an epoch trains, figures and paths as
people read them. TensorFlow's noise is held back by tfhydra/platform/quiet.py.

The live bar while an epoch trains is tfhydra/trainer/progress.py's `EpochProgress` (it needs Keras; this module
imports nothing heavy).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path


class ShortLines(logging.Formatter):
    """A terminal's line: the time and the message, and the level when it is a warning or an error; train.log
    keeps Hydra's whole format (`[date time][logger][LEVEL] - `), 40 characters an 80-column epoch line cannot
    spare."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        if record.levelno < logging.WARNING:
            return line
        time, _, rest = line.partition(" ")
        return f"{time} {record.levelname.lower()}: {rest}"


def shorten_console_lines(logger: logging.Logger | None = None) -> None:
    """The console handler of a command at a terminal writes `ShortLines`; a pipe or a file keeps the whole
    format (what a log collector or a test reads)."""
    for handler in (logger or logging.getLogger()).handlers:
        stream = getattr(handler, "stream", None)
        if type(handler) is logging.StreamHandler and stream is not None and _is_terminal(stream):
            handler.setFormatter(ShortLines())


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


# Who draws the live bar of an epoch: None, the command's rule (a terminal on stderr draws it); "notebook" (set by
# tfhydra.train in a Jupyter kernel: tqdm.auto's bar, a widget when ipywidgets is installed); "off" (quiet=True).
PROGRESS: str | None = None


def on_terminal() -> bool:
    """Whether a person watches stderr (a terminal that can redraw a line in place)."""
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def wants_progress() -> bool:
    """Whether an epoch gets a live bar: in a notebook (tfhydra.train), or where a person watches a terminal."""
    return PROGRESS == "notebook" or (PROGRESS is None and on_terminal())


def progress_bar(**options):
    """A tqdm bar for where it is drawn: the terminal's, as wide as the terminal less one column (a full-width
    line would wrap); in a notebook tqdm.auto's, whose widget needs ipywidgets (without it, the text bar: Jupyter
    redraws a carriage return in place too)."""
    import shutil

    from tqdm import tqdm

    if PROGRESS == "notebook":
        try:
            import ipywidgets  # noqa: F401  (tqdm.auto's notebook bar refuses to start without it)
            from tqdm.auto import tqdm
        except ImportError:
            pass
        return tqdm(**options)
    return tqdm(ncols=min(shutil.get_terminal_size().columns - 1, 140), **options)


SIGNIFICANT_DIGITS = 4


def figure(value) -> str:
    """A measured figure as every line and summary shows it: 4 significant digits (`0.9833`, `0.001`, `2.3e-05`),
    so a loss near zero keeps its digits and an accuracy is not printed to float32's noise
    (`0.9833333492279053`). Integers and non-numbers as they are, NaN/inf as `nan`/`inf`. The record keeps full
    precision; this is only how a person reads it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, int):
        return str(value)
    return f"{value:.{SIGNIFICANT_DIGITS}g}"


def shown_path(path: str | os.PathLike) -> str:
    """A path as a run's lines show it, the same in each: relative to the working directory when it is under it
    (what the user typed, short enough to copy), else absolute."""
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else str(Path(path).absolute())
