"""tfhydra's Optuna search (`hydra/sweeper=optuna`, `hparams_search=...`): Optuna 4/5 through its ask/tell
interface, a study that lives in the sweep directory, and pruning.

Hydra runs it as its sweeper (the plugin class in hydra_plugins/tfhydra_optuna/ only hands over); any Hydra
launcher runs the trials underneath. Each batch: `study.ask()` per trial, one job per trial with the drawn
values as overrides plus `+optuna_trial=<number>` (how the job finds its trial to report to), then
`study.tell()` with what the job's record says: completed (its best monitored value), pruned, or failed
(failed and diverged trials are told as FAIL, never as a made-up value).

The study is `sqlite:///<sweep dir>/optuna.db` unless `storage` names another: the same command again
into the same `hydra.sweep.dir` (or `tfhydra-sweep resume DIR`) loads it, resumes the trials a kill left
RUNNING (their jobs continue from their saved state, in their own directories), and asks for the trials
still missing up to `n_trials`, so trial numbers go on and earlier trials are kept. Nothing here imports TensorFlow;
Optuna is imported when a search starts.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError, clip
from tfhydra.config.hydra_api import job_return_value
from tfhydra.platform.private_api import set_trial_attribute
from tfhydra.platform.terminal import figure
from tfhydra.record.report import write_atomically
from tfhydra.record.run_record import Status, read_record
from tfhydra.record.rundir import SweepPaths

log = logging.getLogger("tfhydra")
TRIAL_KEY = "optuna_trial"  # the override that tells a job its trial number: +optuna_trial=N
PRUNERS = ("median", "hyperband", "none")
SAMPLERS = ("tpe", "random")


@dataclass(frozen=True)
class SearchSpace:
    """One search dimension: `key` overridden with the text Optuna's drawn value stands for."""

    key: str
    distribution: Any  # an optuna.distributions.BaseDistribution
    texts: dict | None = None  # categorical choices: drawn value -> override text (lists are drawn as text)

    def override(self, value: Any) -> str:
        text = self.texts[value] if self.texts is not None else repr(value) if isinstance(value, float) else str(value)
        return f"{self.key}={text}"


def search_space(arguments: Sequence[str], params: dict | None) -> tuple[list[SearchSpace], list[str]]:
    """(dimensions, fixed overrides) from the command line and `hydra.sweeper.params`; the command line wins."""
    import optuna
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    parser = OverridesParser.create()
    lines = [f"{k}={v}" for k, v in (params or {}).items()]
    given = parser.parse_overrides(list(arguments))
    on_line = {o.get_key_element() for o in given}  # a key set or swept on the command line leaves `params`
    parsed = [o for o in parser.parse_overrides(lines) if o.get_key_element() not in on_line] + given
    space: list[SearchSpace] = []
    fixed: list[str] = []
    for override in parsed:
        line = override.input_line
        assert line is not None  # parse_overrides keeps each line (Hydra's own methods assert the same)
        if not override.is_sweep_override():
            fixed.append(line)
            continue
        key, sweep = override.get_key_element(), override.value()
        if isinstance(sweep, IntervalSweep):
            log_scale = "log" in (sweep.tags or set())
            if isinstance(sweep.start, int) and isinstance(sweep.end, int) and not isinstance(sweep.start, bool):
                distribution = optuna.distributions.IntDistribution(sweep.start, sweep.end, log=log_scale)
            else:
                assert sweep.start is not None and sweep.end is not None  # interval(low, high) has both
                distribution = optuna.distributions.FloatDistribution(
                    float(sweep.start), float(sweep.end), log=log_scale
                )
            space.append(SearchSpace(key, distribution))
        elif isinstance(sweep, (ChoiceSweep, RangeSweep)):
            texts = list(override.sweep_string_iterator())
            space.append(SearchSpace(key, optuna.distributions.CategoricalDistribution(texts), {t: t for t in texts}))
        else:  # glob() and the like need the config: not a search dimension
            raise ConfigError(
                key,
                line.split("=", 1)[1],
                "interval(low, high), tag(log, interval(...)), choice(a, b, ...) or range(start, stop[, step])",
                "not a search space Optuna can draw from",
            )
    return space, fixed


def make_pruner(name: str, epochs: int):
    import optuna

    if name == "median":  # prune a trial whose epoch is worse than the median of earlier trials at that epoch
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max(epochs, 1), reduction_factor=3)
    return optuna.pruners.NopPruner()


def make_sampler(name: str, seed: int | None):
    import optuna

    return optuna.samplers.RandomSampler(seed=seed) if name == "random" else optuna.samplers.TPESampler(seed=seed)


def storage_url(sweep_dir: Path, storage: str | None) -> str:
    return storage or f"sqlite:///{SweepPaths(sweep_dir).optuna_db.resolve()}"


STORAGE_ACCEPTED = (
    "sqlite:///<file> of an Optuna study (or a file not there yet), a database URL Optuna opens "
    "(postgresql://..., mysql://...), or null for <sweep dir>/optuna.db"
)
OPTUNA_TABLES = {"studies", "version_info"}  # in every database Optuna (any version) has set up


def open_study(url: str, storage: str | None, **study):
    """optuna.create_study(load_if_exists=True) on `url`, before any job runs. A store it cannot open (garbage
    bytes, a truncated or unreadable file, an unknown dialect, a schema from another Optuna) is one
    ConfigError naming the storage: Optuna would raise SQLAlchemy's traceback, mid-sweep on a resume."""
    import optuna
    import sqlalchemy.exc

    key, value = ("hydra.sweeper.storage", url) if storage else (f"hydra.sweeper.storage (null: {url})", None)
    if url.startswith("sqlite:///"):
        check_sqlite_study(Path(url[len("sqlite:///") :].split("?", 1)[0]), key, value)
    try:
        return optuna.create_study(storage=url, load_if_exists=True, **study)
    except (sqlalchemy.exc.SQLAlchemyError, RuntimeError, OSError, ValueError) as error:
        reason = " ".join(str(getattr(error, "orig", None) or error).split("[SQL:")[0].split())
        raise ConfigError(
            key, value, STORAGE_ACCEPTED, f"Optuna cannot open the study there ({clip(reason, 200)})"
        ) from error


def check_sqlite_study(path: Path, key: str, value: str | None) -> None:
    """An existing SQLite file must be a database, and Optuna's or empty: Optuna would add its tables to a
    database of another program (and write trials into it)."""
    import sqlite3

    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as error:  # garbage bytes: "file is not a database"; cut short: "malformed"
        raise ConfigError(key, value, STORAGE_ACCEPTED, f"{path} is not a readable SQLite database ({error})") from None
    if tables and not OPTUNA_TABLES <= tables:
        raise ConfigError(
            key,
            value,
            STORAGE_ACCEPTED,
            f"{path} is an SQLite database of another program "
            f"(tables {', '.join(sorted(tables)[:5])}), not an Optuna study",
        )


def run_search(
    *,
    config: DictConfig,
    arguments: Sequence[str],
    launch: Callable[[list[list[str]], int], list],
    direction: str,
    n_trials: int,
    n_jobs: int,
    study_name: str,
    storage: str | None,
    sampler: str,
    seed: int | None,
    pruner: str,
    params: dict | None,
) -> None:
    """The search loop: ask a batch, launch it, tell each trial what its job's record says."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sweep_dir = Path(config.hydra.sweep.dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    space, fixed = search_space(arguments, params)
    study = open_study(
        storage_url(sweep_dir, storage),
        storage,
        study_name=study_name,
        direction=direction,
        sampler=make_sampler(sampler, seed),
        pruner=make_pruner(pruner, int(OmegaConf.select(config, "trainer.epochs") or 1)),
    )
    write_atomically(SweepPaths(sweep_dir).multirun, OmegaConf.to_yaml(config))  # what resume and summary read

    def launch_and_tell(batch: list[tuple[int, dict]]) -> None:
        overrides = [
            [*fixed, *(s.override(params[s.key]) for s in space), f"+{TRIAL_KEY}={number}"] for number, params in batch
        ]
        for (number, _), returned in zip(batch, launch(overrides, batch[0][0]), strict=True):
            state, value = outcome(returned)
            for key, test_figure in test_figures(returned).items():  # shown beside the value; never read back
                set_trial_attribute(study, number, key, test_figure)
            study.tell(number, value if state == TrialState.COMPLETE else None, state=state)

    resumed = resume_left_running(study, space, n_jobs, launch_and_tell)
    finished = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)))
    kept = finished - resumed
    if kept:
        print(
            f"study {study_name} in {sweep_dir}: {kept} earlier trial(s) kept, {resumed} resumed, "
            f"{max(0, n_trials - finished)} to run",
            flush=True,
        )
    while finished < n_trials:
        batch = [study.ask({s.key: s.distribution for s in space}) for _ in range(min(n_jobs, n_trials - finished))]
        launch_and_tell([(trial.number, trial.params) for trial in batch])
        finished += len(batch)
    say_best(study, config.trainer.monitor)


def resume_left_running(study, space, n_jobs: int, launch_and_tell: Callable[[list[tuple[int, dict]]], None]) -> int:
    """Trials a kill left running: their jobs resume from the state they saved (same numbers, same directories),
    `n_jobs` at a time; a trial left over another search space cannot be resumed and is failed. Returns how many
    were resumed."""
    from optuna.trial import TrialState

    stale = [
        (t.number, t.params)
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if all(s.key in t.params for s in space)
    ]
    for start in range(0, len(stale), n_jobs):
        log.info(
            "trials %s were left running by an earlier, interrupted run: resuming them",
            [n for n, _ in stale[start : start + n_jobs]],
        )
        launch_and_tell(stale[start : start + n_jobs])
    for left in study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)):
        study.tell(left.number, state=TrialState.FAIL)  # drawn over another search space: cannot be resumed
    return len(stale)


def say_best(study, monitor: str) -> None:
    """The best completed trial in one log line, its test figures beside it (never used to choose)."""
    from optuna.trial import TrialState

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return
    best = study.best_trial
    tested = {k: v for k, v in best.user_attrs.items() if k.startswith("test_")}
    log.info(
        "best trial %d: %s=%s %s; test (not used to choose): %s",
        best.number,
        monitor,
        figure(best.value),
        best.params,
        {k: figure(v) for k, v in tested.items()} or "none",
    )


def _record_of(returned):
    output_dir = (
        OmegaConf.select(returned.hydra_cfg, "hydra.runtime.output_dir", default=None)
        if getattr(returned, "hydra_cfg", None) is not None
        else None
    )
    return read_record(Path(output_dir)) if output_dir else None


def test_figures(returned) -> dict[str, float]:
    """A completed job's test figures as the trial's user attributes (`test_accuracy`, `test_loss` ...): reported
    beside the objective, which stays the validation figure (the sampler and the pruner never see test)."""
    record = _record_of(returned)
    metrics = ((record.test or {}).get("metrics") or {}) if record is not None else {}
    return {f"test_{name}": float(value) for name, value in metrics.items() if isinstance(value, (int, float))}


def outcome(returned) -> tuple[Any, float | None]:
    """(TrialState, value) of a launched job, from its record: completed with a finite value, pruned, or failed."""
    from optuna.trial import TrialState

    record = _record_of(returned)
    value = job_return_value(returned)
    if record is not None and record.status == Status.PRUNED:
        return TrialState.PRUNED, None
    if (
        record is not None
        and record.status == Status.COMPLETED
        and isinstance(value, (int, float))
        and math.isfinite(value)
    ):
        return TrialState.COMPLETE, float(value)
    return TrialState.FAIL, None


def trial_number(cfg: DictConfig) -> int | None:
    """The trial a job of tfhydra's Optuna search reports to (`+optuna_trial=N`), else None."""
    number = cfg.get(TRIAL_KEY) if isinstance(cfg, DictConfig) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None
