"""The one exception type for user mistakes, how it reads, and how it is printed: the one home of "a mistake
said in one line".

`ConfigError` subclasses Hydra's `CompactHydraException`, so when it escapes a job
Hydra prints `str(error)` as a single line and exits 1 instead of a traceback
(`HYDRA_FULL_ERROR=1` still shows the traceback).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hydra.errors import CompactHydraException


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # as YAML and the command line spell it
    if isinstance(value, str):
        return value if value and " " not in value else repr(value)
    if isinstance(value, (float, list)):
        return _number_text(value)
    return str(value)


def _number_text(value: Any) -> str:
    """A schema's float field holds `optimizer.lr=-1` as -1.0 and `multipliers=[1,0.1]` as [1.0, 0.1]: an integral
    float is said as the integer it was most likely typed as (the pre-flight quotes the command line's own text)."""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_number_text(item) for item in value) + "]"
    return repr(value)


def nearest(name: Any, options: Iterable[Any], count: int, cutoff: float) -> list[str]:
    """The options nearest to `name`, ignoring case to find them (`resnet50` finds `ResNet50`) and using it to
    order them (`acuracy` gives `accuracy` before `Accuracy`); the same answer whatever the options' order."""
    import difflib

    names = sorted({str(o) for o in options})
    by_lower: dict[str, list[str]] = {}
    for option in names:
        by_lower.setdefault(option.lower(), []).append(option)
    close = difflib.get_close_matches(str(name).lower(), sorted(by_lower), n=count, cutoff=cutoff)
    found = [o for lower in close for o in by_lower[lower]]
    found.sort(key=lambda o: -difflib.SequenceMatcher(None, str(name), o).ratio())
    return found[:count]


def suggestion(name: Any, options: Iterable[Any], count: int = 3) -> str:
    """` (did you mean a or b?)` with the (at most `count`) options nearest to a misspelt `name`; empty when none
    is near."""
    close = nearest(name, options, count=count, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def short_list(name: Any, options: Iterable[Any], where: str, limit: int = 10) -> str:
    """`one of a, b, c` for a short list; for a long one the nearest few, how many more, and where to see all
    (a 70-name list in one line is noise)."""
    options = [str(o) for o in options]
    shown = nearest(name, options, count=5, cutoff=0.3)
    if len(options) <= limit or (not shown and len(options) <= 2 * limit):  # near nothing: all, if that is short
        return "one of " + ", ".join(options)
    shown = shown or options[:5]
    return f"one of {', '.join(shown)} and {len(options) - len(shown)} more ({where})"


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message (TensorFlow's `message` when it has one), on one
    line, without TensorFlow's `{{function_node ...}}` prefix (where the op ran, not why it failed); its type's
    name when it says nothing. For a one-line error that quotes a library's reason."""
    text = _TF_FUNCTION_NODE.sub("", str(getattr(error, "message", None) or error))
    line = next((line for line in text.splitlines() if line.strip()), "")
    return " ".join(line.split()) or type(error).__name__


def library_reason(error: BaseException, limit: int = 600) -> str:
    """A library's whole reason on one line: Keras 3 puts it on the lines after `... for object <Dense ...>:`, so a
    first line would end at that colon. Keras' list of the objects that failed is left out (the reason names one)."""
    text = _TF_FUNCTION_NODE.sub("", str(getattr(error, "message", None) or error))
    text = text.split("List of objects that could not be loaded")[0]
    return clip(" ".join(text.split()), limit) or type(error).__name__


_TF_FUNCTION_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")


def clip(text: str, limit: int = 300) -> str:
    """`text` on one line, at most about `limit` characters: a long one keeps its start and its end (where a
    library puts the reason: TensorFlow's `<file>; No space left on device`), never cut mid-reason."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    keep = (limit - 5) // 2
    return f"{text[:keep]} ... {text[-keep:]}"


# Why the OS refuses a write, as strerror() spells it (TensorFlow and h5py quote it in their messages).
WRITE_ERRNOS = (
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENOTDIR,
    errno.EISDIR,
)
_TF_WRITE = re.compile(r"(?:^|\s)(/[^;'\"]*?); (" + "|".join(re.escape(os.strerror(e)) for e in WRITE_ERRNOS) + ")")


def write_failure(error: BaseException, default: str | os.PathLike) -> tuple[str, str] | None:
    """(path, reason) when `error` is the OS refusing to write a file (a full disk, a read-only, immutable or
    unwritable directory, a file where a directory goes); None when it is not a write failure.

    Read from an OSError (h5py gives errno and file name only inside its message) or from TensorFlow's
    `<path>; <strerror>`. `default` is named when the error names no file. A full disk's reason says how much
    space is left where the file was going."""
    if isinstance(error, OSError):
        text = str(error)
        number = error.errno or int((re.search(r"errno = (\d+)", text) or [0, 0])[1])
        named = re.search(r"name = '([^']+)'", text)
        path = str(error.filename or (named and named[1]) or default)
        reason = os.strerror(number) if number else clip(text, 160)
    else:
        found = _TF_WRITE.search(_TF_FUNCTION_NODE.sub("", str(getattr(error, "message", None) or error)))
        if found is None:
            return None
        path, reason = found[1].strip(), found[2]
        number = next(e for e in WRITE_ERRNOS if os.strerror(e) == reason)
    if number in (errno.ENOSPC, errno.EDQUOT):
        reason += free_space(path)
    return path, reason


def free_space(path: str | os.PathLike) -> str:
    """`; 12.0 KiB free on <dir>` for the nearest existing directory of `path`; empty when that cannot be known."""
    import shutil
    from pathlib import Path

    directory = Path(path)
    while not directory.is_dir() and directory != directory.parent:
        directory = directory.parent
    try:
        free = float(shutil.disk_usage(directory).free)
    except OSError:
        return ""
    return f"; {size(free)} free on {directory}"


def size(count: float) -> str:
    """A byte count as people read it: `512 bytes`, `12.0 KiB`, `3.4 GiB`."""
    if count < 1024:
        return f"{int(count)} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        count /= 1024
        if count < 1024 or unit == "TiB":
            return f"{count:.1f} {unit}"
    raise AssertionError("unreachable")


class ConfigError(CompactHydraException):
    """A mistake in the user's configuration or input files.

    key: where the mistake is (a dotted config key such as `optimizer.lr`, or a file path)
    value: what the user gave (None when the key alone says it, e.g. a file path)
    accepted: what would have been accepted (a phrase, or an iterable of names)
    problem: what is wrong, when "invalid value" says too little
    """

    def __init__(self, key: str, value: Any, accepted: str | Iterable[str], problem: str = "invalid value"):
        if not isinstance(accepted, str):
            accepted = "one of " + ", ".join(_show(a) for a in accepted)
        self.key, self.value, self.accepted, self.problem = key, value, accepted, problem
        where = key if value is None else f"{key}={_show(value)}"
        super().__init__(f"{where}: {problem}; accepted: {accepted}")

    def __str__(self) -> str:  # one line whatever the parts contain
        return " ".join(super().__str__().split())

    @classmethod
    def from_line(cls, line: str) -> ConfigError:
        """The ConfigError whose one line a child command printed (`Error: <key>=<value>: <problem>; accepted:
        <accepted>`), its text that very line: tfhydra.multirun raises what its sweep's command refused."""
        text = " ".join(line.split()).removeprefix("Error: ")
        where, _, rest = text.partition(": ")
        problem, _, accepted = rest.rpartition("; accepted: ")
        key, _, value = where.partition("=")
        error = cls(key, value or None, accepted or rest, problem or "invalid value")
        error.args = (text,)
        return error

    @property
    def _render_traceback_(self):
        """IPython and Jupyter show what this returns instead of a traceback: the one line, as the command
        prints it (docs/notebook.md). `HYDRA_FULL_ERROR=1` brings the traceback back, as on the command line."""
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise AttributeError("_render_traceback_")
        return lambda: [f"ConfigError: {self}"]


@contextlib.contextmanager
def sweep_error_line() -> Iterator[None]:
    """In a sweeper (tfhydra's basic and Optuna ones), a ConfigError of the sweep itself (its stages, its
    storage, its search space) is `Error: ...`, the last line of stderr, and exit 1: Hydra would print it with its
    HYDRA_FULL_ERROR hint after it. SystemExit passes Hydra's handler."""
    try:
        yield
    except ConfigError as error:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"Error: {error}", file=sys.stderr, flush=True)
        sys.exit(1)


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Inside a single run, a ConfigError ends the process with its one line as the last line of stderr.

    Hydra would print it followed by a hint about HYDRA_FULL_ERROR. A sweep's jobs do not get
    here: tfhydra/sweep/trial.py records their errors and the sweep goes on; called from
    Python (tests, notebooks) the caller gets the ConfigError.
    """
    try:
        yield
    except ConfigError as error:
        if os.environ.get("HYDRA_FULL_ERROR") == "1" or not _in_single_run():
            raise
        logging.getLogger("tfhydra").error("%s", error)
        print(f"Error: {error}", file=sys.stderr, flush=True)
        sys.exit(1)


def _in_single_run() -> bool:
    """True inside `python train.py` without -m (not in a sweep, not when called from Python)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN


# What stops a run's training, said in one line: a TensorFlow runtime error (the input pipeline's or the
# model's), and a run directory that cannot be written (a full disk, an unwritable checkpoints/).


@contextlib.contextmanager
def one_line_tensorflow_errors(cfg: Any) -> Iterator[None]:
    """A TensorFlow runtime error while training (an example of another shape deep in a file, a record that
    does not decode) is one line: the first line of TensorFlow's message, and whether the input pipeline
    (IteratorGetNext) or the model raised it. The record says failed; HYDRA_FULL_ERROR=1 keeps the traceback."""
    import tensorflow as tf  # here: the rest of this module is read before TensorFlow is imported

    try:
        yield
    except tf.errors.OpError as error:
        text, reason = str(getattr(error, "message", None) or error), first_line(error)
        if "IteratorGetNext" in text or "iterator" in text.lower():
            raise ConfigError(
                "data",
                cfg.data.get("name"),
                "examples the source decodes into one shape and dtype (docs/data.md)",
                f"the input pipeline failed while training ({type(error).__name__}: {clip(reason, 240)})",
            ) from error
        raise ConfigError(
            "model",
            cfg.model.get("name") or cfg.model.get("_target_"),
            "a model that runs on these examples",
            f"training failed in TensorFlow ({type(error).__name__}: {clip(reason, 240)})",
        ) from error


@contextlib.contextmanager
def run_directory_writes(paths: Any, kept: str, finish: str) -> Iterator[None]:
    """A full disk or an unwritable directory is one line naming the file and the OS's reason, never the model's
    fault nor a traceback: while training (a checkpoint, history.json, best.weights.h5, TensorBoard's events) it
    costs the steps since the last save (`kept`: the state saved last), after it no training (the trained state);
    `finish` is the command that finishes the run (tfhydra/record/lifecycle.py's `resume_command`); `paths` its
    RunPaths. The record says failed, with that line. Only files in the run directory
    (and a worker's checkpoints/) count: a data file or a user's own file elsewhere is not the run's to explain."""
    import tensorflow as tf

    try:
        yield
    except (OSError, tf.errors.OpError) as error:
        where, reason = write_failure(error, paths.root) or (None, None)
        if where is None or not any(
            Path(where).absolute().is_relative_to(d.absolute()) for d in (paths.root, paths.checkpoints)
        ):
            raise  # TensorFlow failing for another reason (one_line_tensorflow_errors says which), or not our file
        raise ConfigError(
            where,
            None,
            f"a writable run directory with free space ({kept} is kept in "
            f"{paths.checkpoints}; finish the run with: {finish})",
            f"cannot write it ({reason})",
        ) from error
