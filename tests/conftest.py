"""Shared fixtures: configs composed with Hydra's compose API, and the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tfhydra  # noqa: F401  (sets TF_USE_LEGACY_KERAS before any test imports TensorFlow)

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "conf"
TESTS = Path(__file__).resolve().parent

# Small and quick: one epoch, no per-epoch histograms unless a test asks for them.
FAST = ["trainer.epochs=1", "logging.histogram_freq=0"]


def compose_config(overrides=()):
    """The DictConfig `python train.py <overrides>` would run (also for module-scoped fixtures); a value a schema's
    type refuses is the ConfigError the command prints (tfhydra/config/composition.py)."""
    from hydra import compose, initialize_config_dir

    from tfhydra.config.composition import composition_errors, with_open_keys
    from tfhydra.runner.plan import RULES

    overrides = with_open_keys(list(overrides))  # as the command does: trainer.stop_at.<metric>=...
    with (
        initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"),
        composition_errors(list(overrides), [], RULES),
    ):
        return compose(config_name="config", overrides=list(overrides))


@pytest.fixture
def compose_cfg():
    """compose_cfg(overrides) -> the DictConfig `python train.py <overrides>` would run."""
    return compose_config


@pytest.fixture
def hydra_job(tmp_path):
    """hydra_job(overrides, multirun=False) -> a job's config, with Hydra's own config set (`HydraConfig`) as
    `@hydra.main` sets it while the job runs, so an in-process test reaches the Hydra-side branches (`under_hydra`,
    `in_sweep`, the launcher's threads) without a subprocess. As lightning-hydra-template's `cfg_train`: composed
    with `return_hydra_config=True`, then `HydraConfig().set_config(cfg)`; the job's directory is tmp_path/job,
    and HydraConfig is unset again after the test."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import open_dict

    def set_job(overrides=(), multirun: bool = False):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
        with open_dict(cfg):
            cfg.hydra.runtime.output_dir = str(tmp_path / "job")
            cfg.hydra.mode = RunMode.MULTIRUN if multirun else RunMode.RUN
            cfg.hydra.job.num = 0
        HydraConfig.instance().set_config(cfg)
        return cfg

    yield set_job
    HydraConfig.instance().cfg = None


def run_cli(*args: str, cwd: Path = ROOT, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python train.py ARGS` as a user would; tests/ is importable for user-code `_target_`s.

    The command is forked from a server that has imported TensorFlow once (tests/cli_fork_server.py): the server
    holding tf_keras, or for `keras=3` the one holding Keras 3 (TensorFlow reads its Keras at import). A real process
    is started instead when the test sets environment variables that are read at import (any but `FORK_SAFE_ENV`),
    the command sweeps with joblib's launcher, or TFHYDRA_TEST_FORK=0 is set."""
    full_env = {**os.environ, "PYTHONPATH": str(TESTS), **(env or {})}
    full_env.pop("HYDRA_FULL_ERROR", None) if not (env or {}).get("HYDRA_FULL_ERROR") else None
    server = _server_for(args) if set(env or {}) <= FORK_SAFE_ENV else None
    if server is not None:
        return server.run(list(args), cwd=cwd, env=full_env, timeout=timeout)
    return _real_process([str(ROOT / "train.py"), *args], cwd, full_env, timeout)


def run_module(
    module: str, *args: str, cwd: Path = ROOT, env: dict, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` (tfhydra.evaluate, tfhydra.predict) with exactly `env`, forked from the same server
    as `run_cli` unless TFHYDRA_TEST_FORK=0: a test of the tool's answers, not of its start-up."""
    server = _server_for(())
    if server is not None:
        return server.run(list(args), cwd=cwd, env=env, timeout=timeout, module=module)
    return _real_process(["-m", module, *args], cwd, env, timeout)


def _real_process(command: list[str], cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """`python COMMAND` as a process of its own, its output captured."""
    return subprocess.run(
        [sys.executable, *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _server_for(args) -> _ForkServer | None:
    """The test server a command with these overrides is forked from (the one holding its Keras), or None for a
    real process: TFHYDRA_TEST_FORK=0, a sweep over several Keras, or joblib's launcher (its loky workers hang when
    their sweep is forked from the server; seen: two sweeps past 300 s)."""
    keras = _keras_of(args)
    if os.environ.get("TFHYDRA_TEST_FORK", "1") == "0" or "hydra/launcher=joblib" in args:
        return None
    return _CLI_SERVERS.get(keras)


# Variables no module the servers preload reads at import (TensorFlow, tf_keras or Keras 3, tfhydra's rooms):
# keras-hub (and huggingface_hub's HF_HUB_OFFLINE) is imported by the run itself; Hydra reads HYDRA_FULL_ERROR when
# it reports; SLURM's commands read SLURM_CONF when the sweep calls them; the label index reads TFHYDRA_CACHE_DIR
# when it writes (tfhydra/data/index.py); TF_CONFIG and the variables of a SLURM step are read when the strategy is
# built and the run recorded (tfhydra/strategy/build.py, tfhydra/platform/scheduler.py), as the forked workers of
# tests/cluster_workers.py show.
FORK_SAFE_ENV = {
    "HF_HUB_OFFLINE",
    "HYDRA_FULL_ERROR",
    "SLURM_CONF",
    "TFHYDRA_CACHE_DIR",
    "TF_CONFIG",
    *("SLURM_PROCID", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS"),
    *("SLURM_JOB_ID", "SLURM_NTASKS"),
}


def start_cli(*args: str, cwd: Path, env: dict, stderr: Path) -> ForkedProcess | subprocess.Popen:
    """`python train.py ARGS` started as a process of its own (stdout to /dev/null, stderr to a file), forked from
    the test server on the same terms as `run_cli`; `env` is the whole environment."""
    stderr.write_text("")
    server = _server_for(args)
    if server is not None:
        return server.start(list(args), cwd, env, {"stdout": os.devnull, "stderr": str(stderr)})
    return start_process(*args, cwd=cwd, env=env, stderr=stderr)


def start_module(module: str, *args: str, cwd: Path, env: dict, stderr: Path) -> ForkedProcess | subprocess.Popen:
    """`python -m MODULE ARGS` started as a process of its own (stdout to /dev/null, stderr to a file), forked from
    the test server as `run_module` is unless TFHYDRA_TEST_FORK=0; `env` is the whole environment."""
    stderr.write_text("")
    server = _server_for(())
    if server is not None:
        return server.start(list(args), cwd, env, {"stdout": os.devnull, "stderr": str(stderr)}, module=module)
    with stderr.open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )


def start_process(*args: str, cwd: Path, env: dict, stderr: Path) -> subprocess.Popen:
    """`python train.py ARGS` as a process of its own (stdout to /dev/null, stderr to a file); also what
    benchmarks/combinations.py starts outside pytest, where no fork server runs."""
    with stderr.open("w") as err:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "train.py"), *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )


def _keras_of(args) -> str:
    """The Keras a command's overrides choose: "2" unless one says `keras=...` ("3", or a sweep of several)."""
    chosen = "2"
    for override in args:
        key, _, value = override.lstrip("+~").partition("=")
        if key == "keras" and value.strip():
            chosen = value.strip()
    return chosen


class ForkedProcess:
    """A command forked by tests/cli_fork_server.py, with the part of `subprocess.Popen` the tests use: `pid`, `args`,
    `poll`, `wait`, `send_signal`, `kill`, `returncode`. The server answers the child's pid, then its exit code
    (negative: the signal that ended it) on the same connection once it has reaped it."""

    def __init__(self, connection, args: list[str]) -> None:
        self._connection = connection
        self._answers = connection.makefile("r")
        self.pid = int(self._answers.readline())
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode if self.returncode is not None else self._read(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self.returncode if self.returncode is not None else self._read(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, signum: int) -> None:
        """As Popen's: nothing once the process is known to have ended, nor when it ended a moment ago."""
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        import signal

        self.send_signal(signal.SIGKILL)

    def _read(self, timeout: float | None) -> int | None:
        import select

        if not select.select([self._connection], [], [], timeout)[0]:
            return None
        self.returncode = int(self._answers.readline())
        self._answers.close()
        self._connection.close()
        return self.returncode


class _ForkServer:
    """The client of tests/cli_fork_server.py: started on first use, one per test process and Keras, stopped by
    its pid. The Keras 3 server is started as a `keras=3` command starts its children (TFHYDRA_KERAS=3), and its
    children get what such a command has set by the time it would import TensorFlow (tfhydra/config/keras_choice.py)."""

    def __init__(self, keras: str) -> None:
        self.process: subprocess.Popen | None = None
        self.address = ""
        self.keras_env = {"TFHYDRA_KERAS": "3", "TF_USE_LEGACY_KERAS": "0"} if keras == "3" else {}

    def _start(self) -> None:
        import tempfile

        folder = tempfile.mkdtemp(prefix="tfhydra-cli-")
        self.address = os.path.join(folder, "socket")
        # the server imports tfhydra from the checkout these tests belong to (the editable install's, or a git
        # worktree's), and nothing else a developer's PYTHONPATH may hold
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(ROOT), **self.keras_env}
        self.process = subprocess.Popen(
            [sys.executable, str(TESTS / "cli_fork_server.py"), self.address],
            env=env,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "ready"

    def start(self, argv: list[str], cwd: Path, env: dict, streams: dict, module: str | None = None) -> ForkedProcess:
        """The command forked as a process of its own, used as a `subprocess.Popen` is (its streams on files)."""
        import socket

        if self.process is None or self.process.poll() is not None:
            self._start()
        request = {"argv": argv, "cwd": str(cwd), "env": {**env, **self.keras_env}, "module": module, **streams}
        command = [sys.executable, *(["-m", module] if module else [str(ROOT / "train.py")]), *argv]
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.address)
        connection.sendall((json.dumps(request) + "\n").encode())
        return ForkedProcess(connection, command)

    def run(
        self, argv: list[str], cwd: Path, env: dict, timeout: float, module: str | None = None
    ) -> subprocess.CompletedProcess:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="tfhydra-cli-out-") as out:
            streams = {"stdout": os.path.join(out, "stdout"), "stderr": os.path.join(out, "stderr")}
            for path in streams.values():
                Path(path).touch()
            process = self.start(argv, cwd, env, streams, module)
            try:
                code = process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                raise
            stdout, stderr = (Path(streams[name]).read_text(errors="replace") for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess(process.args, code, stdout, stderr)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.address:
            import shutil

            shutil.rmtree(os.path.dirname(self.address), ignore_errors=True)


_CLI_SERVERS = {"2": _ForkServer("2"), "3": _ForkServer("3")}


def pytest_sessionfinish(session, exitstatus):
    for server in _CLI_SERVERS.values():
        server.stop()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """How long the workers waited for each other's shared runs (tests/shared_runs.py): time no test needs."""
    if hasattr(config, "workerinput"):
        return
    from shared_runs import SHARED_DIR, waits_summary

    line = waits_summary(config._tmp_path_factory.getbasetemp() / SHARED_DIR)
    if line:
        terminalreporter.write_line(line)


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def read_run_record(run_dir: Path) -> dict:
    """A run's metrics.json, read through the run record (tfhydra/record/run_record.py), as a plain dict."""
    from tfhydra.record.run_record import load_record

    return load_record(run_dir).as_dict()


def assert_failed_record(run_dir: Path, message: str) -> None:
    """A run stopped by a mistake found in the job still says so in its record, with the one line."""
    record = read_run_record(run_dir)
    assert record["status"] == "failed" and message in record["error"], record


# Property tests (Hypothesis) draw from this seed, printed in pytest's header so a failure can be replayed.
HYPOTHESIS_SEED = int(os.environ.get("TFHYDRA_HYPOTHESIS_SEED") or int.from_bytes(os.urandom(4), "little"))


def counts_cases(at_least: int | None = None):
    """Decorate a Hypothesis property (above its @given/@settings) so the same test asserts how many cases it ran:
    its `max_examples`, or `at_least` where the drawn space is smaller than that (Hypothesis stops once it has
    drawn every case). A property that ran nothing fails; the count is checked in the test itself, so no test
    order (pytest-randomly) can skip it. The count is kept as `test.cases` (a list, one item per case)."""
    import functools

    def decorate(test):
        inner, cases = test.hypothesis.inner_test, []

        def counted(*args, **kwargs):
            cases.append(None)
            return inner(*args, **kwargs)

        test.hypothesis.inner_test = counted  # Hypothesis' documented hook for wrapping what it calls

        @functools.wraps(test)
        def checked(*args, **kwargs):
            # @settings or @seed put above this decorator would land on this wrapper, not on the property (which
            # would then run Hypothesis' defaults: 100 cases, a 200 ms deadline)
            for attribute in ("_hypothesis_internal_use_settings", "_hypothesis_internal_use_seed"):
                assert getattr(checked, attribute, None) is getattr(test, attribute, None), (
                    f"put @counts_cases() above @settings and @seed on {test.__name__}"
                )
            cases.clear()
            test(*args, **kwargs)
            wanted = test._hypothesis_internal_use_settings.max_examples if at_least is None else at_least
            # at least: Hypothesis also calls the body for draws it discards (an overrun), which max_examples
            # does not count (seen: 13 calls for 12 examples)
            assert len(cases) >= wanted, f"the property ran {len(cases)} cases, not at least {wanted}"

        checked.cases = cases
        return checked

    return decorate


def pytest_report_header(config):
    return f"hypothesis seed: {HYPOTHESIS_SEED} (replay: TFHYDRA_HYPOTHESIS_SEED={HYPOTHESIS_SEED} pytest ...)"
