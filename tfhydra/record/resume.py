"""How a phase starts, and why: decided once, at the top of the phase, logged once and kept in the record.

A phase (a whole run, or one of its earlier phases in phases/<i>_<label>) starts in one of four ways:
- `fresh`: nothing of an earlier attempt is used (a new directory, `trainer.resume=false`, or an attempt that
  failed or was killed before its first save: its epochs are dropped, and the start is a warning saying so);
- `saved_state`: an unfinished attempt saved its state (checkpoints/state/): training goes on from it, after the
  `epoch` epochs that attempt recorded (mid-epoch, when a signal saved it mid-epoch);
- `after_training`: an attempt ended training and saved its last weights (checkpoints/last.weights.h5) but
  was stopped before its record was final: only the best weights, the test and the export are redone;
- `kept`: the phase completed in an earlier run and is not rerun (an earlier phase, a sweep run again).
`start_phase` is the one place that decides (`clear_for` acts on a fresh start); the recipe (tfhydra/runner/job.py), the
sweep's job (tfhydra/sweep/trial.py) and the phases read its `Start` instead of asking again. The record's `resumed`
field is `Start.as_record()`.

`checkpoints/history.json` (the epochs of an unfinished attempt, kept beside its state) is read here, by
`read_history`, and written by `write_history`: its format is `HISTORY_FIELDS`. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from tfhydra.config.bounded import load_json_bounded, read_text_bounded
from tfhydra.config.errors import clip
from tfhydra.record.lifecycle import kept_record
from tfhydra.record.rundir import RunPaths

log = logging.getLogger("tfhydra")

FRESH, SAVED_STATE, AFTER_TRAINING, KEPT = "fresh", "saved_state", "after_training", "kept"
KINDS = (FRESH, SAVED_STATE, AFTER_TRAINING, KEPT)
# checkpoints/history.json: the epochs' logs, each epoch's training seconds, whether training ended (its last
# weights saved), where it diverged, each blow-up trainer.recovery undid, and each validation's figures under
# trainer.val_every_steps (a resumed run replays its best and patience from them).
EMPTY_HISTORY = {
    "epochs": [],
    "train_seconds": [],
    "finished": False,
    "diverged": None,
    "recoveries": [],
    "validations": [],
}
HISTORY_FIELDS = tuple(EMPTY_HISTORY)


@dataclass(frozen=True)
class Start:
    """How a phase starts (`kind`, one of KINDS), after how many epochs trained earlier, and why (one line)."""

    kind: str
    epoch: int
    reason: str

    def as_record(self) -> dict:
        return asdict(self)

    @property
    def trained(self) -> bool:
        """Training ended in an earlier attempt: only what comes after it is redone."""
        return self.kind == AFTER_TRAINING


def how_it_starts(paths: RunPaths, resume: bool) -> Start:
    """The decision alone (nothing is written or deleted): see the module's docstring for the four kinds."""
    record = kept_record(paths.root)
    if record is not None:
        return Start(
            KEPT,
            record.epochs_run,
            f"completed in an earlier run ({record.epochs_run} epoch(s)): kept as it is, not rerun",
        )
    if not resume:
        return Start(FRESH, 0, "trainer.resume=false: any saved state is discarded")
    saved = read_history(paths.history)
    epochs = len(saved["epochs"]) if saved is not None else 0
    if saved is not None and saved.get("finished") and paths.last_weights.is_file():
        return Start(
            AFTER_TRAINING,
            epochs,
            f"training ended in an earlier attempt ({epochs} epochs): redoing what came after it",
        )
    if paths.state.exists():
        return Start(
            SAVED_STATE,
            epochs,
            f"resuming from the saved state in {paths.relative(paths.state)} ({epochs} epoch(s) recorded)",
        )
    if paths.history.exists():
        return Start(
            FRESH,
            0,
            f"{paths.relative(paths.history)} records epochs but no state was saved before the "
            "earlier attempt ended: starting over",
        )
    if paths.metrics.is_file():  # an attempt that failed or was stopped before its first save
        return Start(FRESH, 0, "an earlier attempt ended before it saved any state to resume from: starting over")
    return Start(FRESH, 0, "a new run: nothing saved in its directory")


def start_phase(paths: RunPaths, resume: bool) -> Start:
    """Decide how the phase in `paths` starts and say it once in train.log. The caller keeps the answer."""
    start = how_it_starts(paths, resume)
    say(start)
    return start


def clear_for(start: Start, paths: RunPaths) -> None:
    """What a fresh start must not read back (the state and history.json of an earlier attempt) is deleted; the
    phase calls it where a write that fails is one line and a record (tfhydra/runner/phase.py)."""
    if start.kind == FRESH:
        shutil.rmtree(paths.state, ignore_errors=True)
        paths.history.unlink(missing_ok=True)


def say(start: Start) -> None:
    """The one log line of a phase's start (a warning when an earlier attempt's epochs are dropped)."""
    after = f" after epoch {start.epoch}" if start.kind in (SAVED_STATE, AFTER_TRAINING) else ""
    (log.warning if "starting over" in start.reason else log.info)("start: %s%s (%s)", start.kind, after, start.reason)


def read_history(path: Path | None) -> dict | None:
    """checkpoints/history.json, or None when there is none. A damaged one is said in the log and treated as
    none: the resumable state (checkpoints/state/) still holds the model and the epoch to continue from."""
    if not path or not path.exists():
        return None
    try:
        saved = load_json_bounded(read_text_bounded(path))
        if not (
            isinstance(saved, dict)
            and isinstance(saved.get("epochs"), list)
            and isinstance(saved.get("train_seconds"), list)
        ):
            raise ValueError("not a tfhydra epoch record")
        return saved
    except (OSError, ValueError) as error:
        log.warning(
            "%s cannot be read (%s): the figures of earlier epochs are lost; training continues from the saved state",
            path,
            clip(str(error), 160),
        )
        return None


def write_history(path: Path, history: dict) -> None:
    """Replace history.json whole with the `HISTORY_FIELDS` of `history`, each missing one at its `EMPTY_HISTORY`
    value (a reader sees the old file or the new one, never half)."""
    from tfhydra.record.report import write_json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {key: history.get(key, empty) for key, empty in EMPTY_HISTORY.items()})
