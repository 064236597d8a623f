"""tfhydra from a notebook or a script: `train` one run, `sweep` several, and get each back as a `Result`.

What a TensorFlow engineer in Jupyter expects (docs/notebook.md): the epochs visible while they train (a live bar
and one line per epoch; `quiet=True` shows nothing), a mistake as one line (`tfhydra.ConfigError`, shown by
IPython without a traceback), a run directory chosen as the command chooses it, and calls that can be repeated in
one kernel: each call gives back what it changed in the process (Hydra's global state, the Keras mixed-precision
policy and session, tfhydra's log handlers and bar). TensorFlow is imported by the first training, not here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfhydra.config.errors import ConfigError
from tfhydra.platform.terminal import shown_path
from tfhydra.record.headline import best_in_words, headline_figures, tested_in_words
from tfhydra.record.run_record import RunRecord, Status, load_record, read_record
from tfhydra.record.rundir import RunPaths, SweepPaths

log = logging.getLogger("tfhydra")
LOADABLE = ("keras", "saved_model", "tflite")  # export formats load_model reads, in the order it prefers them
CONSOLE_FORMAT = "%(asctime)s %(message)s"
LOG_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"  # Hydra's, as the command's train.log


@dataclass(frozen=True)
class Result:
    """A run as it stands on disk: its directory and its record (metrics.json, tfhydra/record/run_record.py).

    `status`, `headline` (the task's headline figures: `val_rmse`, `val_r2`, `test_rmse`, `test_r2` for a
    regression), `best` (the best epoch's figures, the epoch numbered from 1, and `tie` when it was chosen from
    epochs tied on the monitor), `best_epoch`, `metrics` (the best epoch's figures without its number), `test` (the
    test split's figures), `history` (every epoch's figures, in order), `load_model()`."""

    run_dir: Path
    record: RunRecord
    # load_model's models, kept with the Result: a SavedModel's functions hold only weak references to its
    # variables, so `result.load_model().serve(x)` would otherwise call into an object already collected
    _loaded: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def status(self) -> Status:
        return self.record.status

    @property
    def error(self) -> str | None:
        return self.record.error

    @property
    def best(self) -> dict:
        return dict(self.record.best or {})

    @property
    def best_epoch(self) -> int | None:
        return self.best.get("epoch")

    @property
    def metrics(self) -> dict:
        return {k: v for k, v in self.best.items() if k not in ("epoch", "tie")}

    @property
    def headline(self) -> dict:
        """The task's headline figures (tfhydra/record/headline.py): `val_<name>` at the best epoch, `test_<name>`."""
        record = self.record
        return headline_figures(record.task, record.best, (record.test or {}).get("metrics"), record.monitor)

    @property
    def test(self) -> dict:
        """The test split's figures, measured once on the exported weights (docs/data.md); {} without a test split."""
        return dict((self.record.test or {}).get("metrics") or {})

    @property
    def monitored(self) -> float | None:
        """The best value of `trainer.monitor` (what `tfhydra.run` returns)."""
        return self.record.best_monitored

    @property
    def history(self) -> list[dict]:
        """Every epoch's figures (loss, metrics, val_*, learning rate), read from the run's
        checkpoints/history.json by its reader (a resumed run's epochs included); the record's copy without it."""
        from tfhydra.record.resume import read_history  # the one reader of history.json

        saved = read_history(RunPaths(self.run_dir).history)
        return list(saved["epochs"]) if saved is not None else list(self.record.history)

    @property
    def exports(self) -> dict[str, Path]:
        return {name: self.run_dir / path for name, path in (self.record.exports or {}).items()}

    def load_model(self, format: str | None = None) -> Any:
        """The exported model: `keras` a tf_keras model (`.predict`), `saved_model` the SavedModel as
        `tf.saved_model.load` gives it (`.serve(x)` takes the model's inputs, `.serve_raw(x)` the data as stored),
        `tflite` a `tf.lite.Interpreter`, allocated. Without `format`, the first exported of those, in that order.
        Loaded once per format: the same object again on the next call."""
        exported = [f for f in LOADABLE if f in self.exports]
        chosen = format or (exported[0] if exported else None)
        if chosen not in exported:
            raise ConfigError(
                "format",
                chosen,
                exported or "a run that exported one of " + ", ".join(LOADABLE),
                f"not exported by the run in {self.run_dir} (status {self.status}; "
                "export.formats lists what a run exports)",
            )
        if chosen not in self._loaded:
            from tfhydra.export.served import loaded_export

            self._loaded[chosen] = loaded_export(chosen, self.exports[chosen])
        return self._loaded[chosen]

    def __repr__(self) -> str:
        record = self.record
        metrics = (record.test or {}).get("metrics")
        said = best_in_words(record.task, record.best, metrics, record.monitor) if self.best else "no epoch"
        tested = tested_in_words(record.task, record.best, metrics, record.monitor) if self.best else ""
        return f"Result({self.status}, {said}{f', {tested}' if tested else ''}, run_dir={str(self.run_dir)!r})"


def load_result(run_dir: str | Path) -> Result:
    """The `Result` of a run directory (one `train` or a sweep made, or the command): its record read back. A
    directory that holds no readable record is one ConfigError naming `run_dir` and why."""
    from tfhydra.api import RUN_ACCEPTED, no_record, path_argument
    from tfhydra.record.run_record import RecordError

    folder = path_argument(run_dir, "run_dir")
    if folder is None:
        raise ConfigError("run_dir", None, RUN_ACCEPTED, "not given")
    try:
        return Result(folder.absolute(), load_record(folder))
    except (OSError, RecordError) as error:
        raise ConfigError("run_dir", str(folder), RUN_ACCEPTED, no_record(folder, error)) from None


def train(
    overrides: Sequence[str] = (),
    config_dir: str | Path | None = None,
    run_dir: str | Path | None = None,
    quiet: bool = False,
) -> Result:
    """Train one run as `tfhydra-train <overrides>` would and return it as a `Result`.

    `config_dir`: a project's own conf/ (as the command's `--config-dir`; `./conf` is found without it);
    `run_dir`: where to run (default: as the command, `outputs/<date>/<time.micro>/` below the working directory;
    an unfinished run there is continued, a completed one refused); `quiet`: no bar and no lines (train.log still
    has them). A mistake raises `tfhydra.ConfigError` (one line) before anything is written; a run that fails or
    diverges while training returns its `Result` with that status, and an error that is not a mistake is raised.
    """
    from tfhydra.api import compose, flag_argument, one_run_at_a_time, override_list, path_argument, pinned, run
    from tfhydra.runner.hydra_files import chosen_run_dir
    from tfhydra.trust.locks import writing

    asked, folder = override_list(overrides), path_argument(run_dir, "run_dir")
    overrides = pinned(asked, "hydra.run.dir", folder.absolute()) if folder is not None else asked
    with one_run_at_a_time("tfhydra.train"), python_session(flag_argument(quiet, "quiet")) as log_to:
        cfg = compose(overrides, config_dir)  # the pre-flight checks `run_dir` as the command's hydra.run.dir
        run_dir = chosen_run_dir(cfg)
        with writing(run_dir, "run"):  # taken (and made) before its first line, as the command's Hydra callback does
            log_to(RunPaths(run_dir).train_log)
            log.info("run directory %s; overrides: %s", shown_path(run_dir), " ".join(asked) or "none (the defaults)")
            run(cfg, run_dir=run_dir)
    return load_result(run_dir)


def multirun(
    overrides: Sequence[str],
    config_dir: str | Path | None = None,
    sweep_dir: str | Path | None = None,
    quiet: bool = False,
) -> list[Result]:
    """`tfhydra-train -m <overrides>` in a child process (the sweep's launcher, its summary and its exit code are
    the command's), its lines passed on unless `quiet`; returns the `Result` of every job that wrote a record,
    in job order. The jobs are checked here first: a mistake raises `tfhydra.ConfigError` before any job starts.
    The kernel's `sys.path` reaches the jobs through PYTHONPATH, so a model module it imports imports there too."""
    from tfhydra.api import flag_argument, override_list, path_argument, pinned
    from tfhydra.cli.preflight import check_overrides
    from tfhydra.config.project import CONFIG_DIR, project_config_dir
    from tfhydra.runner.hydra_files import chosen_run_dir

    overrides, quiet = override_list(overrides), flag_argument(quiet, "quiet")
    config_dir, sweep_dir = path_argument(config_dir, "config_dir"), path_argument(sweep_dir, "sweep_dir")
    if sweep_dir is not None:  # checked by the pre-flight as the command's hydra.sweep.dir (a sweep run again)
        overrides = pinned(overrides, "hydra.sweep.dir", sweep_dir.absolute())
    flags = ["--config-dir", str(config_dir.absolute())] if config_dir is not None else []
    with python_session(quiet=True):
        primary = project_config_dir(flags) or CONFIG_DIR
        check_overrides(primary, "config", overrides, multirun=True)
        folder = chosen_run_dir(_compose_fixed(primary, overrides), key="hydra.sweep.dir")
    # the folder, resolved once (a `hydra.sweep.dir=` of the overrides included), is the one the child uses
    before = _records_written(folder)
    finished = _run_command(
        [sys.executable, "-m", "tfhydra", "-m", *flags, *pinned(overrides, "hydra.sweep.dir", folder)], quiet
    )
    if finished.returncode and _records_written(folder) == before:  # refused, or failed before any job wrote
        if finished.last.startswith("Error: "):  # the command's one line: its refusal, never the sweep there before
            raise ConfigError.from_line(finished.last)
        raise RuntimeError(f"the sweep in {folder} ran no job (exit code {finished.returncode}): {finished.last}")
    return [
        Result(job.absolute(), record)
        for job in sorted(SweepPaths(folder).jobs(), key=_job_number)
        if (record := read_record(job)) is not None
    ]


def _records_written(folder: Path) -> dict[Path, int]:
    """When each job's record in the sweep directory was last written: a command that exits non-zero having
    written none ran no job, and the records there are an earlier sweep's."""
    records = (RunPaths(job).metrics for job in SweepPaths(folder).jobs())
    return {record: record.stat().st_mtime_ns for record in records if record.is_file()}


@dataclass
class _Finished:
    returncode: int
    last: str


def _run_command(command: list[str], quiet: bool) -> _Finished:
    """The command in a child process with the kernel's own import path; its lines printed as they come."""
    from tfhydra.platform.command import handed_import_path

    env = {**os.environ, **handed_import_path()}
    last = ""
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        bufsize=1,
    ) as child:
        assert child.stdout is not None  # stdout=PIPE
        for line in child.stdout:
            last = line.strip() or last
            if not quiet:
                print(line, end="", flush=True)
    return _Finished(child.returncode, last)


def _compose_fixed(primary: Path, overrides: list[str]):
    """The config with a sweep's fixed overrides only: where its sweep directory goes (`hydra.sweep.dir`)."""
    from hydra import compose
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from tfhydra.config.hydra_api import initialize

    parsed = OverridesParser.create().parse_overrides(overrides)
    fixed = [o.input_line for o in parsed if not o.is_sweep_override() and o.input_line is not None]
    with initialize(primary):
        return compose(config_name="config", overrides=fixed, return_hydra_config=True)


def _job_number(job: Path) -> tuple[int, str]:
    number = job.name.split("_", 1)[0]
    return (int(number) if number.isdigit() else sys.maxsize, str(job))


def in_notebook() -> bool:
    """A Jupyter kernel (IPython's ZMQ shell, Colab's): where tqdm.auto draws and the epoch lines go to the cell."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return getattr(shell, "kernel", None) is not None


@contextlib.contextmanager
def python_session(quiet: bool) -> Iterator:
    """One call's changes to the process, given back at its end whichever way it ends: the bar
    (tfhydra/platform/terminal.py) and tfhydra's log lines (the cell, and the run's train.log: the yielded function adds
    it), the filter of TensorFlow's start-up lines, Hydra's global state (a kernel composes again), the Keras
    mixed-precision policy and session (a second run starts as the first did)."""
    from hydra.core.global_hydra import GlobalHydra

    from tfhydra.platform import terminal
    from tfhydra.platform.quiet import QUIET

    saved = terminal.PROGRESS, log.level, GlobalHydra.instance().is_initialized(), log.propagate
    policy = _keras_policy()
    terminal.PROGRESS = "off" if quiet else "notebook" if in_notebook() else None
    log.setLevel(logging.INFO)
    log.propagate = False  # a root handler (anything's logging.basicConfig) would print every line twice
    handlers = [] if quiet else [_handler(logging.StreamHandler(sys.stdout), CONSOLE_FORMAT, "%H:%M:%S")]
    for handler in handlers:
        log.addHandler(handler)

    def log_to(path: Path) -> None:
        handlers.append(_handler(_RunLog(path, delay=True), LOG_FORMAT))
        log.addHandler(handlers[-1])

    QUIET.start()  # TensorFlow's lines held back for the call (tfhydra/platform/quiet.py)
    try:
        yield log_to
    finally:
        QUIET.release()
        for handler in handlers:
            log.removeHandler(handler)
            handler.close()
        terminal.PROGRESS, level, hydra_was_set, log.propagate = saved
        log.setLevel(level)
        if not hydra_was_set:
            GlobalHydra.instance().clear()
        _restore_keras(policy)


class _RunLog(logging.FileHandler):
    """train.log, as the command keeps it; the run directory is made with its first line."""

    def _open(self):
        Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
        return super()._open()


def _handler(handler: logging.Handler, fmt: str, datefmt: str | None = None) -> logging.Handler:
    handler.setFormatter(logging.Formatter(fmt, datefmt))
    return handler


def _keras_policy() -> str | None:
    keras = getattr(sys.modules.get("tfhydra.platform.keras_lib"), "keras", None)  # the run's Keras, if loaded
    return keras.mixed_precision.global_policy().name if keras is not None else None


def _restore_keras(policy: str | None) -> None:
    """The global policy back to what it was before the call (float32 before the first), and a new session: the
    next model's layer names and graph start afresh."""
    keras = getattr(sys.modules.get("tfhydra.platform.keras_lib"), "keras", None)  # the run's Keras, if loaded
    if keras is not None:
        keras.mixed_precision.set_global_policy(policy or "float32")
        keras.backend.clear_session()
