"""The experiment trackers of one run: started once the run knows it is the chief, handed every epoch, ended
after metrics.json is written (so its status and the artefacts are final).

A tracker is a side channel, never a reason to stop training: every call into one is guarded, and the
first exception is one warning in train.log ("logger.mlflow: ... failed ...") after which that tracker is
left alone for the rest of the run. The others, and the run, go on.

Epochs are logged once each, numbered from 1 (the step is the epoch). A resumed run continues the same
tracker runs (their ids are kept in `<run>/trackers.json`) from the epoch after the last one the tracker
has: MLflow's and CSV's own stores say which that is, W&B's offline files cannot be read back, so its count
is kept in trackers.json. An epoch that a resumed run trains again keeps the figures first logged for it.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from tfhydra.config.bounded import load_json_bounded, read_text_bounded
from tfhydra.config.registry import Registry
from tfhydra.logger.schemas import CsvConfig
from tfhydra.platform.deadline import NoAnswer, SignalWhileWaiting, within
from tfhydra.record.report import write_json
from tfhydra.record.run_record import Status
from tfhydra.record.rundir import RunPaths

log = logging.getLogger("tfhydra")
# option name -> build(node, paths, info) -> Tracker: csv below, MLflow and W&B in their modules (which import their
# packages only when a tracker starts: both are optional extras)
LOGGERS = Registry(
    "logger", locations=["tfhydra.logger.trackers", "tfhydra.logger.mlflow_run", "tfhydra.logger.wandb_run"]
)
# What tfhydra's record statuses are in a tracker's terms (MLflow's RunStatus names): a pruned trial did what
# its search asked (FINISHED, tagged pruned); a diverged run has no model (FAILED); a signal is KILLED.
TRACKER_STATUS = {s.value: s.tracker for s in Status if s is not Status.NOT_STARTED}  # tfhydra.record.Status


@dataclass
class RunInfo:
    """What every tracker is told about the run (tfhydra/runner/job.py fills it in from the config and Hydra)."""

    name: str  # the run directory's name: the tracker run's name
    config: dict  # the composed config, resolved, without `hydra`
    tags: dict  # model, data, sweep (absent outside a sweep)
    resume: bool = True  # trainer.resume: false starts new tracker runs
    sweep: str | None = None  # the sweep directory's name, for a sweep's job


class Tracker:
    """One tracker's run. Subclasses implement the four calls; `Trackers` guards them. A tracker that talks to a
    server says where (`address`) and how long one call may wait for it (`deadline`, seconds; None: unbounded,
    called in the caller's thread)."""

    name = ""
    address: str | None = None
    deadline: float | None = None

    def start(self, saved: dict) -> dict:
        """Start or continue (`saved`: what the last start returned) the tracker run; returns what to keep in
        trackers.json, with `logged`: the last epoch this run already has."""
        raise NotImplementedError

    def log_epoch(self, epoch: int, values: dict) -> None:
        raise NotImplementedError

    def end(self, status: str, paths: RunPaths) -> None:
        """`status`: the record's (STATUSES); metrics.json is written."""
        raise NotImplementedError

    def quiet(self) -> contextlib.AbstractContextManager:
        """What every call into the tracker runs inside: a tracker whose library logs on its own (MLflow's
        tracebacks, SQLAlchemy's retries) silences it here, so a failure is the guard's one warning only."""
        return contextlib.nullcontext()


# names -> [how many calls hold them quiet, their levels before the first]: a call given up on (deadline.py) goes on
# in its thread and may log later (urllib3's retries), so the loggers stay quiet until the last holder ends.
_QUIET: dict[tuple[str, ...], list] = {}
_QUIET_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_loggers(names: tuple[str, ...]):
    """The Python loggers `names` (and their children) say nothing while the block runs, in any thread, until the
    last block holding them ends; their levels are put back then, so a user's own MLflow or W&B logging outside
    tfhydra's calls is untouched."""
    loggers = [logging.getLogger(name) for name in names]
    with _QUIET_LOCK:
        held = _QUIET.setdefault(names, [0, []])
        if held[0] == 0:
            held[1] = [logger.level for logger in loggers]
            for logger in loggers:
                logger.setLevel(logging.CRITICAL + 1)
        held[0] += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            held[0] -= 1
            if held[0] == 0:
                for logger, level in zip(loggers, held[1], strict=True):
                    logger.setLevel(level)


def quietly(quiet: Callable[[], contextlib.AbstractContextManager], call: Callable[[], Any]) -> Callable[[], Any]:
    """`call` inside `quiet()` where it runs: in a bounded call's own thread, which may outlive the wait."""

    def run() -> Any:
        with quiet():
            return call()

    return run


@dataclass
class Trackers:
    """The run's trackers; an empty one (no logger but TensorBoard, a non-chief worker) does nothing."""

    trackers: list[Tracker] = field(default_factory=list)
    paths: RunPaths | None = None
    saved: dict = field(default_factory=dict)  # tracker name -> what its start returned (trackers.json)
    failed: set = field(default_factory=set)
    stop: Any = None  # the run's StopOnSignal (duck-typed: `signum`, a signal taken and not yet acted on)

    @property
    def active(self) -> bool:
        return any(t.name not in self.failed for t in self.trackers)

    def guarded(self, tracker: Tracker, action: str, call: Callable[[], Any]) -> Any:
        """`call`, waited on for at most the tracker's deadline; whatever it raises is one warning and the tracker
        is left alone from then on. A signal handler's exception (Interrupted, Ctrl-C) drops it too, and goes on
        up: the run's ending must not wait for a tracker that did not answer."""
        if tracker.name in self.failed:
            return None
        try:
            quiet = getattr(tracker, "quiet", contextlib.nullcontext)  # a duck-typed tracker may have none
            with quiet():  # here too: what it imports to be quiet is imported before the deadline counts
                return within(
                    getattr(tracker, "deadline", None),
                    quietly(quiet, call),
                    lambda: getattr(self.stop, "signum", None),
                )
        except (NoAnswer, SignalWhileWaiting) as waited:
            self.failed.add(tracker.name)
            log.warning("%s", unanswered(tracker, action, waited))
        except Exception as error:  # noqa: BLE001  (whatever a tracker raises, training goes on)
            self.failed.add(tracker.name)
            log.warning(
                "logger.%s: %s failed (%s: %s); the run goes on without %s",
                tracker.name,
                action,
                type(error).__name__,
                " ".join(str(error).split())[:300],
                tracker.name,
            )
        except BaseException:
            self.failed.add(tracker.name)
            raise
        return None

    def start(self, resume: bool) -> Trackers:
        kept = read_json_map(self.paths.trackers) if resume and self.paths else {}
        for tracker in self.trackers:
            state = self.guarded(tracker, "starting its run", partial(tracker.start, kept.get(tracker.name) or {}))
            if state is not None:
                self.saved[tracker.name] = state
        self.save()
        return self

    def log_history(self, epochs: list[dict]) -> None:
        """Hand each tracker the epochs of `epochs` (the run's history, epoch 1 first) it does not have yet."""
        changed = False
        for tracker in self.trackers:
            state = self.saved.get(tracker.name)
            if state is None:
                continue
            for epoch, values in enumerate(epochs, 1):
                if epoch <= state.get("logged", 0) or not values:  # {}: an epoch whose figures were lost
                    continue
                figures = {k: float(v) for k, v in values.items() if isinstance(v, (int, float))}
                logged = self.guarded(tracker, f"logging epoch {epoch}", partial(tracker.log_epoch, epoch, figures))
                if logged is None and tracker.name in self.failed:
                    break
                state["logged"], changed = epoch, True
        if changed:
            self.save()

    def end(self, status: str, history: list[dict]) -> None:
        """After metrics.json is written: the epochs not logged yet (a run whose training ended in an earlier
        attempt trains none), then each tracker's end with the record's status."""
        self.log_history(history)
        for tracker in self.trackers:
            if tracker.name in self.saved and self.paths is not None:  # start_trackers gives trackers their paths
                self.guarded(tracker, "ending its run", partial(tracker.end, status, self.paths))
        self.trackers = []  # ended once

    def save(self) -> None:
        if self.paths is None or not self.saved:
            return
        try:
            write_json(self.paths.trackers, self.saved)
        except OSError as error:  # a full disk: the trackers still log; a resume would start new tracker runs
            if "trackers.json" not in self.failed:
                self.failed.add("trackers.json")
                log.warning(
                    "%s cannot be written (%s): a resumed run will start new tracker runs", self.paths.trackers, error
                )


def unanswered(tracker: Tracker, action: str, waited: NoAnswer | SignalWhileWaiting) -> str:
    """The one line for a tracker call given up on: the tracker, its address, and the key of its deadline."""
    where = f"logger.{tracker.name}: {action}: {tracker.address or 'its server'}"
    if isinstance(waited, NoAnswer):
        return (
            f"{where} gave no answer within logger.{tracker.name}.timeout={waited.seconds:g} s; the run goes on "
            f"without {tracker.name} (its run stays RUNNING there: the same command resumes it)"
        )
    return f"{where} was still waited on when {waited} came: given up, so the run stops at once, without {tracker.name}"


def read_json_map(path: Path) -> dict:
    """A trackers.json: {} when there is none or it cannot be read (new tracker runs are started then)."""
    try:
        saved = load_json_bounded(read_text_bounded(Path(path)))
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def flatten(config: dict, prefix: str = "") -> dict[str, Any]:
    """{"optimizer.lr": 0.001, ...}: the dotted keys a user overrides, as trackers show parameters."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


# ---- CSV: no dependency ----------------------------------------------------------------------------


class CSVTracker(Tracker):
    """`<run>/metrics.csv`: a row per epoch, `epoch` first, then the figures of the first epoch logged (a
    figure that appears later is left out: the columns stay those of the header)."""

    name = "csv"

    def __init__(self, paths: RunPaths) -> None:
        self.path = paths.metrics_csv
        self.columns: list[str] | None = None

    def start(self, saved: dict) -> dict:
        logged = 0
        if self.path.is_file():  # a resumed run: the file says how far it got
            with self.path.open(newline="") as handle:
                rows = list(csv.DictReader(handle))
            self.columns = list(rows[0]) if rows else None
            logged = max((int(r["epoch"]) for r in rows if str(r.get("epoch", "")).isdigit()), default=0)
        return {"path": str(self.path), "logged": logged}

    def log_epoch(self, epoch: int, values: dict) -> None:
        new = self.columns is None
        if new:
            self.columns = ["epoch", *values]
        with self.path.open("w" if new else "a", newline="") as handle:
            writer = csv.DictWriter(handle, self.columns or [], extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow({"epoch": epoch, **{k: ("" if math.isnan(v) else v) for k, v in values.items()}})

    def end(self, status: str, paths: RunPaths) -> None:
        pass  # every row is on disk as it is written


@LOGGERS.register("csv", schema=CsvConfig)
def build_csv(node: DictConfig, paths: RunPaths, info: RunInfo) -> Tracker:
    return CSVTracker(paths)
