"""Files a run or sweep leaves, written atomically (temporary file, then rename): the run record
(tfhydra/record/run_record.py), `history.json`, summaries, evaluations, weights and exports.

A reader (a user, `tensorboard`, the sweep summary of a sweep still running) or a kill at any
moment then sees the previous complete file or the new complete file, never half of one.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tfhydra.record.monitor import Monitor


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary name beside `path` for writers that want a file name (matplotlib's savefig): renamed to
    `path` when the block ends, removed if it raises, so `path` is always the old file or the new one.

    The temporary file is in the same directory (a rename is atomic only within one file system)
    and hidden (`.<name>.<pid>.<random>.partial`), so globs over the directory do not pick it up.
    """
    path = Path(path)
    # Unique per writer (two processes may write one sweep's summary); created by the writer with the
    # usual permissions (tempfile.mkstemp would make every record private to its owner).
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:  # a KeyboardInterrupt mid-write too: leave nothing half-written behind
        temporary.unlink(missing_ok=True)
        raise


def write_atomically(path: str | Path, content: str | bytes) -> None:
    """Write `content` (text as UTF-8, or bytes) to `path` all at once, as seen by any reader."""
    with atomic_path(path) as temporary:
        if isinstance(content, str):
            temporary.write_text(content, encoding="utf-8")
        else:
            temporary.write_bytes(content)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(_finite(payload), indent=2, sort_keys=False) + "\n")


def _finite(value: Any) -> Any:
    """JSON has no NaN/inf: write them as null so every reader can parse the file."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def epoch_summary(epochs: list[dict], monitor: str, mode: str, from_epoch: int = 0) -> dict:
    """Best and final epoch's metrics (epochs are numbered from 1); the best is one from `from_epoch` (0-based) on,
    with the `tie` it was chosen from when other epochs had exactly its monitored value (record/monitor.py)."""
    if not epochs:
        return {"best": None, "final": None}
    chosen = Monitor(monitor, mode).choose(epochs, from_epoch)
    best = chosen.epoch or len(epochs)  # no figure from `from_epoch` on: the last epoch stands for the run
    tie = {"tie": chosen.tie} if chosen.tie else {}
    return {"best": {"epoch": best, **epochs[best - 1], **tie}, "final": {"epoch": len(epochs), **epochs[-1]}}


def validation_summary(validations: list[dict], monitor: str, mode: str, from_epoch: int = 0) -> dict:
    """Under trainer.val_every_steps, the best is a validation, not an epoch: {epoch, step, val_...} of the best by
    the monitor from epoch `from_epoch` (0-based) on, with its `tie` (the tied validations' `steps`); {}: none has
    a figure (the epochs' summary stands)."""
    counted = [v for v in validations if isinstance(v, dict) and v.get("epoch", 0) > from_epoch]
    chosen = Monitor(monitor, mode).choose(counted)
    if chosen.epoch is None:
        return {}
    best = dict(counted[chosen.epoch - 1])
    if chosen.tie:
        steps = [counted[i - 1].get("step") for i in chosen.tie["epochs"]]
        best["tie"] = {"value": chosen.value, "steps": steps, "kept": best.get("step"), "by": chosen.tie["by"]}
    return {"best": best}


def evaluation_in_words(result: dict) -> str:
    """tfhydra-evaluate's answer as a person reads it: which model on which examples, one figure a line (4
    significant digits), where the whole result went; `--json` prints it as one JSON line instead (for scripts)."""
    from tfhydra.platform.terminal import figure, shown_path

    figures = result["metrics"]
    width = max((len(name) for name in figures), default=0)
    lines = [
        f"{shown_path(result['run_dir'])}: its {result['export']} on the {result['split']} split of "
        f"{result['data']} ({result['examples']} examples, {result['seconds']:.1f} s)",
        *(f"  {name:<{width}}  {figure(value)}" for name, value in figures.items()),
    ]
    if result.get("note"):
        lines.append(f"note: {result['note']}")
    if result.get("written_to"):
        lines.append(f"written to {shown_path(result['written_to'])} (the same as one JSON line: --json)")
    return "\n".join(lines)
