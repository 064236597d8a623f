"""metrics.json: the record of one run, written atomically (temporary file, then rename)."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, payload: dict[str, Any]) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(_finite(payload), indent=2, sort_keys=False) + "\n")
    os.replace(partial, path)


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
    """Best and final epoch's metrics (epochs are numbered from 1); the best is one from `from_epoch` (0-based) on."""
    if not epochs:
        return {"best": None, "final": None}
    scored = [(i, e) for i, e in enumerate(epochs) if i >= from_epoch and math.isfinite(e.get(monitor, math.nan))]
    pick = max if mode == "max" else min
    best_index, best = pick(scored, key=lambda ie: ie[1][monitor]) if scored else (len(epochs) - 1, epochs[-1])
    return {"best": {"epoch": best_index + 1, **best}, "final": {"epoch": len(epochs), **epochs[-1]}}
