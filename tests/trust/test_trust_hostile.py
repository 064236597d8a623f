"""Hostile directories (issue 35, items 1-2): a file in a run or sweep directory names no hydra setting, no
server and no place outside the directory to write; every YAML and JSON file read back is measured first.

- A 2 kB YAML alias bomb and a deeply nested file, in each file a reader takes, are one ConfigError line (or,
  for the summary, which only displays, nothing), never a walk of 10⁹ nodes or a RecursionError.
- A property: for generated alias trees and nestings, the bounded reader refuses exactly those whose expanded
  size or depth is over the limits (the sizes computed here independently).
- `tfhydra-sweep resume` takes no hydra setting from multirun.yaml: one the file records and the command does
  not give is refused by name; the command's own are used and said; `--trust-sweep` still takes the file's.
- evaluate: a recorded server address is refused; an `evaluations/` link out of the run is refused before work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import trust_dirs
import yaml
from conftest import HYPOTHESIS_SEED, TESTS, counts_cases, last_line
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tfhydra.config.bounded import MAX_DEPTH, MAX_NODES, TooLarge, check_yaml_shape, load_json_bounded
from tfhydra.config.errors import ConfigError


@contextmanager
def answers_within(seconds: int):
    """A reader that hangs fails the test instead of the suite (SIGALRM; the limit is generous: a hang is minutes)."""

    def hung(*_):
        raise AssertionError(f"no answer within {seconds} s: the reader walks the file")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def alias_tree(levels: int, fan: int) -> tuple[str, int]:
    """YAML of `levels` anchored lists, each holding `fan` aliases of the one before ("billion laughs"), and the
    number of nodes a walk of it visits (the top mapping, each key, each list and scalar as expanded)."""
    lines, sizes = [f"l0: &l0 [{', '.join(['lol'] * fan)}]"], [1 + fan]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fan)}]")
        sizes.append(1 + fan * sizes[-1])
    return "\n".join(lines) + "\n", 1 + sum(1 + s for s in sizes)


BOMB, BOMB_NODES = alias_tree(9, 10)
DEEP = "deep: " + "[" * 5000 + "]" * 5000 + "\n"


def test_the_bomb_is_small_and_huge():
    assert len(BOMB) < 2100 and BOMB_NODES > 10**9


@pytest.mark.parametrize(
    "text, problem", [(BOMB, f"it expands to more than {MAX_NODES} nodes"), (DEEP, "nest")]
)  # libyaml's own limit may answer first
def test_each_reader_of_a_directory_answers_a_bomb_in_one_line(tmp_path, text, problem):
    from tfhydra.trust.readers import plain_file, run_config, run_overrides, sweep_command

    run = trust_dirs.write_run(tmp_path / "run")
    sweep = trust_dirs.write_sweep(tmp_path / "sweep")
    readers = {
        run / ".hydra" / "overrides.yaml": lambda: run_overrides(run, None),
        run / ".hydra" / "config.yaml": lambda: run_config(run, None),
        sweep / "multirun.yaml": lambda: sweep_command(sweep, None),
    }
    for path, read in readers.items():
        path.write_text(text)
        with answers_within(60), pytest.raises(ConfigError) as refused:
            read()
        message = str(refused.value)
        assert "\n" not in message and message.startswith(f"{path}: it is ") and problem in message, message
        with answers_within(60):
            assert plain_file(path, path.parent) is None  # the summary displays nothing of it


def test_a_record_nested_past_the_recursion_limit_is_a_record_error(tmp_path):
    from tfhydra.record.run_record import RecordError, load_record, read_record

    (tmp_path / "metrics.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RecordError, match="nests too deep"):
        load_record(tmp_path)
    assert read_record(tmp_path) is None
    with pytest.raises(TooLarge):
        load_json_bounded('{"a": ' * 50_000 + "1" + "}" * 50_000)


CASES = int(os.environ.get("TFHYDRA_TRUST_CASES", "25"))


@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=CASES * 2, deadline=None, suppress_health_check=list(HealthCheck))
@given(levels=st.integers(1, 12), fan=st.integers(1, 40), depth=st.integers(1, 3 * MAX_DEPTH))
def test_the_reader_refuses_exactly_what_is_over_the_limits(levels, fan, depth):
    text, nodes = alias_tree(levels, fan)
    with answers_within(60):
        if nodes > MAX_NODES:
            with pytest.raises(TooLarge, match="expands to more than"):
                check_yaml_shape(text)
        else:
            check_yaml_shape(text)
            assert len(yaml.safe_load(text)) == levels
        nested = "[" * depth + "1" + "]" * depth  # a top-level list `depth` levels deep
        if depth > MAX_DEPTH:
            with pytest.raises(TooLarge, match="nests deeper"):
                check_yaml_shape(nested)
        else:
            check_yaml_shape(nested)


# ---- resume: hydra settings only from the command line -----------------------------------------------------------

SLURM = ["hydra/launcher=submitit_slurm", "hydra.launcher.setup=['touch MARKER']"]


def hostile_sweep(tmp_path: Path, hydra=(), task=()) -> Path:
    return trust_dirs.write_sweep(
        tmp_path / "sweep", task=trust_dirs.SWEEP_TASK + list(task), hydra=["hydra.mode=MULTIRUN", *hydra]
    )


def test_resume_takes_no_launcher_from_the_file_and_names_what_it_left(tmp_path):
    from tfhydra.sweep.__main__ import resume_command

    sweep = hostile_sweep(tmp_path, SLURM)
    with pytest.raises(ConfigError) as refused:
        resume_command(sweep)
    message = str(refused.value)
    assert "resume takes only from its own command line: hydra/launcher, hydra.launcher.setup;" in message
    assert "touch" not in message  # keys only: a value from the file is not offered for pasting
    command = resume_command(sweep, settings=["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])
    assert [c for c in command if c.startswith("hydra")] == [
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep.resolve()}",
    ]
    trusted = resume_command(sweep, trusted=True)
    assert all(s in trusted for s in SLURM)  # the lifted gate takes the file's settings, as before


@pytest.mark.parametrize(
    "task, problem",
    [
        (["+hydra.job.env_set.TFHYDRA_CONFIG_DIR=/elsewhere"], "its task overrides hold +hydra.job.env_set.TFHYDRA_"),
        (["data.service.address=grpc://127.0.0.1:1"], "which names a server to connect to"),
        (["logger=[wandb]", "logger.wandb.mode=online"], "which names a server to connect to"),
        (["data=mnist", "data.cache_dir=/elsewhere"], "which names where to write"),
    ],
)
def test_resume_refuses_environment_servers_and_paths_from_the_task_overrides(tmp_path, task, problem):
    from tfhydra.sweep.__main__ import resume_command

    with pytest.raises(ConfigError, match=problem.replace("+", r"\+").replace(".", r"\.")):
        resume_command(hostile_sweep(tmp_path, task=task))


def test_resume_takes_hydra_settings_only_after_the_directory(tmp_path):
    from tfhydra.sweep.__main__ import main

    sweep = hostile_sweep(tmp_path)
    assert main(["resume", str(sweep), "model=cnn"]) == 1  # a task override: a new sweep, not a resume


def test_the_resume_command_refuses_a_slurm_setup_line_in_one_line_and_runs_nothing(tmp_path):
    sweep = hostile_sweep(tmp_path, SLURM)
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    result = subprocess.run(
        [sys.executable, "-m", "tfhydra.sweep", "resume", str(sweep)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert last_line(result.stderr).startswith(f"Error: {sweep}/multirun.yaml: it records hydra settings"), (
        result.stderr
    )
    assert not (tmp_path / "MARKER").exists() and not (sweep / "MARKER").exists()
    assert sorted(p.name for p in sweep.iterdir()) == ["multirun.yaml"]  # nothing written


# ---- evaluate: no server from the run, no writing out of it ----------------------------------------------------


def test_evaluate_refuses_a_recorded_server_address(tmp_path):
    from tfhydra.trust.readers import run_overrides

    run = trust_dirs.write_run(
        tmp_path / "run", trust_dirs.RUN_OVERRIDES + ["data.service.address=grpc://10.0.0.9:5050"]
    )
    with pytest.raises(ConfigError) as refused:
        run_overrides(run, None)
    assert "data.service.address=grpc://10.0.0.9:5050, which names a server to connect to" in str(refused.value)


def test_evaluate_writes_nothing_through_a_link_out_of_the_run(tmp_path):
    from tfhydra.evaluate import evaluate_run

    run = trust_dirs.write_run(tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "evaluations").symlink_to(elsewhere)
    with pytest.raises(ConfigError) as refused:
        evaluate_run(run, [])
    assert "it links out of the directory" in str(refused.value) and "\n" not in str(refused.value)
    assert list(elsewhere.iterdir()) == []
