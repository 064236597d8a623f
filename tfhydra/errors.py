"""The one exception type for user mistakes, and how it reads.

`ConfigError` subclasses Hydra's `CompactHydraException`, so when it escapes a job
Hydra prints `str(error)` as a single line and exits 1 instead of a traceback
(`HYDRA_FULL_ERROR=1` still shows the traceback).
"""
from __future__ import annotations

from typing import Any, Iterable

from hydra.errors import CompactHydraException


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # as YAML and the command line spell it
    if isinstance(value, str):
        return value if value and " " not in value else repr(value)
    return str(value)


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


def suggestion(name: Any, options: Iterable[Any]) -> str:
    """` (did you mean a or b?)` with the options nearest to a misspelt `name`; empty when none is near."""
    close = nearest(name, options, count=3, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def short_list(name: Any, options: Iterable[Any], where: str, limit: int = 10) -> str:
    """`one of a, b, c` for a short list; for a long one the nearest few, how many more, and where to see all
    (a 70-name list in one line is noise)."""
    options = [str(o) for o in options]
    if len(options) <= limit:
        return "one of " + ", ".join(options)
    shown = nearest(name, options, count=5, cutoff=0.3) or options[:5]
    return f"one of {', '.join(shown)} and {len(options) - len(shown)} more ({where})"


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message (TensorFlow's `message` when it has one), on one
    line; its type's name when it says nothing. For a one-line error that quotes a library's reason."""
    text = getattr(error, "message", None) or str(error)
    line = next((line for line in str(text).splitlines() if line.strip()), "")
    return " ".join(line.split()) or type(error).__name__


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
