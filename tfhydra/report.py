"""metrics.json and the other records a run or sweep leaves: written atomically (temporary file, then rename),
and read back, checked, by what continues from a finished run (`python -m tfhydra.evaluate`,
`compression.from_run`).

A reader (a user, `tensorboard`, the sweep summary of a sweep still running) or a kill at any
moment then sees the previous complete file or the new complete file, never half of one.
"""
from __future__ import annotations

import json
import math
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from tfhydra.errors import ConfigError


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
    """Best and final epoch's metrics (epochs are numbered from 1); the best is one from `from_epoch` (0-based) on."""
    if not epochs:
        return {"best": None, "final": None}
    scored = [(i, e) for i, e in enumerate(epochs) if i >= from_epoch and math.isfinite(e.get(monitor, math.nan))]
    pick = max if mode == "max" else min
    best_index, best = pick(scored, key=lambda ie: ie[1][monitor]) if scored else (len(epochs) - 1, epochs[-1])
    return {"best": {"epoch": best_index + 1, **best}, "final": {"epoch": len(epochs), **epochs[-1]}}


def run_status(run: Path) -> str | None:
    """The `status` of a run's metrics.json; None when it has none or it cannot be read."""
    try:
        record = json.loads((Path(run) / "metrics.json").read_text())
    except (OSError, ValueError):
        return None
    return record.get("status") if isinstance(record, dict) else None


def completed_run_config(run: Path, key: str, value: Any, accepted: str, needs: Iterable[str] = ()):
    """The saved config (`.hydra/config.yaml`) of the completed run in `run`, checked before anything uses the run.

    A run directory can come from anywhere (a colleague, an older tfhydra, a run killed half-way), so
    it must be a finished run (`metrics.json` status completed) with the files `needs` names (paths
    relative to it), and its config must parse. Any problem is one ConfigError naming `key`/`value`
    and `accepted`. YAML is read with OmegaConf's safe loader: no Python objects are built from it.
    """
    run = Path(run)
    if not run.is_dir():
        raise ConfigError(key, value, accepted, "no such directory")
    status = run_status(run)
    if status != "completed":
        unreadable = status is None and (run / "metrics.json").is_file()
        raise ConfigError(key, value, accepted, "not a completed run (its metrics.json cannot be read)" if unreadable
                          else f"not a completed run (status: {status})")
    missing = [name for name in (".hydra/config.yaml", *needs) if not (run / name).exists()]
    if missing:
        raise ConfigError(key, value, accepted, f"it has no {', '.join(missing)}")
    config = run_yaml(run, ".hydra/config.yaml", key, value, accepted)
    from omegaconf import DictConfig

    sections = ("model", "data", "trainer", "compression")
    if not isinstance(config, DictConfig) or not all(isinstance(config.get(s), DictConfig) for s in sections):
        raise ConfigError(key, value, accepted, "its .hydra/config.yaml is not a tfhydra run config (no model, data, "
                          "trainer and compression sections)")
    return config


def run_yaml(run: Path, name: str, key: str, value: Any, accepted: str):
    """`run/name` parsed (a mapping, or a list for overrides.yaml), or a one-line ConfigError."""
    import yaml
    from omegaconf import DictConfig, ListConfig, OmegaConf

    try:
        loaded = OmegaConf.load(Path(run) / name)
    except Exception as error:  # whatever is wrong with the file, the run cannot be used
        if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
            problem = f"line {error.problem_mark.line + 1}: {error.problem}"
        else:
            problem = f"{type(error).__name__}: {error}"
        raise ConfigError(key, value, accepted, f"its {name} is not readable YAML ({problem})") from error
    if not isinstance(loaded, (DictConfig, ListConfig)):
        raise ConfigError(key, value, accepted, f"its {name} is not a YAML mapping")
    return loaded
