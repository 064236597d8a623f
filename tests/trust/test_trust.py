"""One trust boundary (issue 24): what a run or sweep directory says is data, read only by tfhydra/trust.

- No module but tfhydra/trust parses a directory's YAML (read from the package's source).
- Real commands on directories that someone edited: `tfhydra-sweep resume` and `tfhydra-evaluate` exit 1
  with one line naming the file and the flag, and the code the files name never runs (a marker file);
  with `--trust-sweep` / `--trust-run` they run, say so, and record it.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trust_dirs
import yaml
from conftest import ROOT, TESTS, last_line, read_run_record, run_cli, run_module

PACKAGE = ROOT / "tfhydra"
PARSERS = {
    ("yaml", "safe_load"),
    ("yaml", "load"),
    ("yaml", "full_load"),
    ("yaml", "unsafe_load"),
    ("OmegaConf", "load"),
}
DIRECTORY_FILES = {"config", "overrides", "hydra_config", "multirun"}  # RunPaths / SweepPaths of the files in question


def readers_outside_the_boundary() -> list[str]:
    """`module:line` of each YAML parse, and of each read of a run's or sweep's own files, outside tfhydra/trust."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.is_relative_to(PACKAGE / "trust"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and (node.value.id, node.attr) in PARSERS
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("read_text", "read_bytes", "open")
                and isinstance(node.value, ast.Attribute)
                and node.value.attr in DIRECTORY_FILES
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.value.attr}.{node.attr}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "open"
                and node.args
                and isinstance(node.args[0], ast.Attribute)
                and node.args[0].attr in DIRECTORY_FILES
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} open(.{node.args[0].attr})")
    return sorted(found)


def test_no_module_but_the_trust_boundary_parses_a_directorys_files():
    assert readers_outside_the_boundary() == []


def test_the_rule_sees_a_reader_that_bypasses_the_boundary(tmp_path, monkeypatch):
    rogue = PACKAGE / "sweep" / "_rogue_reader_for_test.py"
    rogue.write_text("import yaml\n\ndef read(paths):\n    return yaml.safe_load(paths.multirun.read_text())\n")
    try:
        assert readers_outside_the_boundary() == [
            "tfhydra/sweep/_rogue_reader_for_test.py:4 .multirun.read_text",
            "tfhydra/sweep/_rogue_reader_for_test.py:4 yaml.safe_load",
        ]
    finally:
        rogue.unlink()


# ---- real commands on edited directories ---------------------------------------------------------------------


def command(module: str, *args, cwd: Path, marker: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` in `cwd`, forked from the tests' server (conftest.run_module): what is asserted here is
    the tool's answer and what ran, not its start-up."""
    env = {**os.environ, "PYTHONPATH": str(TESTS), trust_dirs.MARKER_ENV: str(marker)}
    env.pop("HYDRA_FULL_ERROR", None)
    return run_module(module, *args, cwd=cwd, env=env, timeout=timeout)


SWEEP_ARGS = [
    "-m",
    "optimizer.lr=1e-3,5e-4",
    "model=mlp",
    "trainer.epochs=1",
    "logging.histogram_freq=0",
    "logging.write_graph=false",
    "export.formats=[saved_model]",
]


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    """A real 2-job sweep, completed (its jobs also serve as finished runs for evaluate)."""
    sweep = tmp_path_factory.mktemp("trusted") / "sweep"
    done = run_cli(*SWEEP_ARGS, f"hydra.sweep.dir={sweep}")
    assert done.returncode == 0, done.stderr[-3000:]
    return sweep


def edited_sweep(finished_sweep: Path, tmp_path: Path, task=(), hydra=(), config_dir: Path | None = None) -> Path:
    sweep = tmp_path / "sweep"
    shutil.copytree(finished_sweep, sweep, symlinks=True)
    recorded = yaml.safe_load((sweep / "multirun.yaml").read_text())
    recorded["hydra"]["overrides"]["task"] += list(task)
    recorded["hydra"]["overrides"]["hydra"] += list(hydra)
    if config_dir is not None:
        for source in recorded["hydra"]["runtime"]["config_sources"]:
            if source["provider"] == "main":
                source["path"] = str(config_dir)
    (sweep / "multirun.yaml").write_text(yaml.safe_dump(recorded))
    return sweep


def hostile_conf(root: Path) -> Path:
    """A `conf/` shipped inside a directory: its primary config adds a Hydra callback that runs code."""
    conf = root / "conf"
    conf.mkdir(parents=True)
    (conf / "config.yaml").write_text(
        "defaults: [tfhydra, _self_]\nhydra:\n  callbacks:\n    evil:\n      _target_: marker_code.TouchCallback\n"
    )
    return conf


EDITS = {  # name: (task overrides added, hydra overrides added, the refusal's start after "Error: <file>: ")
    "hydra callback": (
        (),
        ["+hydra.callbacks.evil._target_=marker_code.TouchCallback"],
        "it records hydra settings that resume takes only from its own command line: hydra.callbacks.evil._target_;",
    ),
    "target in a task override": (
        ["+trainer.callbacks=[{_target_:marker_code.touch}]"],
        (),
        "it holds +trainer.callbacks=[{_target_:marker_code.touch}], which names code",
    ),
    "interpolation": (
        ["trainer.loss=${oc.create:{_target_:marker_code.touch}}"],
        (),
        "it holds trainer.loss=${oc.create:{_target_:marker_code.touch}}, whose interpolation",
    ),
    "environment": (
        (),
        ["+hydra.job.env_set.PYTHONSTARTUP=/tmp/x.py"],
        "it records hydra settings that resume takes only from its own command line: hydra.job.env_set.PYTHONSTARTUP;",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EDITS))
def test_resume_refuses_an_edited_multirun_yaml_in_one_line(finished_sweep, tmp_path, name):
    task, hydra, problem = EDITS[name]
    sweep = edited_sweep(finished_sweep, tmp_path, task, hydra)
    marker = tmp_path / "MARKER"
    result = command("tfhydra.sweep", "resume", str(sweep), cwd=tmp_path, marker=marker)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    message = last_line(result.stderr)
    assert message.startswith(f"Error: {sweep}/multirun.yaml: {problem}"), message
    assert message.endswith("or --trust-sweep if you trust whoever wrote that directory"), message
    assert not marker.exists()


@pytest.mark.slow
def test_resume_takes_no_config_directory_from_the_sweep_unless_trusted(finished_sweep, tmp_path):
    sweep = edited_sweep(finished_sweep, tmp_path, config_dir=hostile_conf(tmp_path / "shipped"))
    marker = tmp_path / "MARKER"
    result = command("tfhydra.sweep", "resume", str(sweep), cwd=tmp_path, marker=marker)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--config-dir" not in result.stdout.splitlines()[0]  # the printed command: tfhydra's own configs
    assert "kept: 0_optimizer.lr=0.001" in result.stdout and not marker.exists()

    sweep = edited_sweep(finished_sweep, tmp_path / "again", config_dir=tmp_path / "shipped" / "conf")
    trusted = command("tfhydra.sweep", "resume", "--trust-sweep", str(sweep), cwd=tmp_path, marker=marker)
    assert trusted.returncode == 0, trusted.stderr[-3000:]
    assert f"Warning: --trust-sweep: {sweep} is trusted" in trusted.stderr
    assert f"--config-dir {tmp_path / 'shipped' / 'conf'}" in trusted.stdout, trusted.stdout[-2000:]
    assert marker.exists(), (
        trusted.stdout[-3000:] + trusted.stderr[-3000:]
    )  # the gate was lifted: the shipped conf/'s callback ran, as the user asked
    assert "--trust-sweep" in (sweep / "trusted.log").read_text()


@pytest.mark.slow
@pytest.mark.parametrize(
    "line,problem",
    [
        (
            "trainer.loss=${oc.create:{_target_:marker_code.touch}}",
            "whose interpolation would run when the config is read",
        ),
        ("data.cache={tmp}/outside/cache", "which names where to write"),
    ],
)
def test_evaluate_refuses_what_slipped_past_its_old_check(finished_sweep, tmp_path, line, problem):
    run = tmp_path / "run"
    shutil.copytree(finished_sweep / "0_optimizer.lr=0.001", run)
    line = line.replace("{tmp}", str(tmp_path))
    saved = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text())
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(saved + [line]))
    marker = tmp_path / "MARKER"
    result = command("tfhydra.evaluate", str(run), cwd=tmp_path, marker=marker)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    message = last_line(result.stderr)
    assert message.startswith(f"Error: {run}/.hydra/overrides.yaml: it holds {line}, {problem}"), message
    assert "--trust-run" in message
    assert not marker.exists() and not (tmp_path / "outside").exists()


@pytest.mark.slow
def test_evaluate_refuses_an_override_it_would_ignore(finished_sweep, tmp_path):
    run = finished_sweep / "0_optimizer.lr=0.001"
    result = command("tfhydra.evaluate", str(run), "model=cnn", cwd=tmp_path, marker=tmp_path / "MARKER")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == (
        "Error: model=cnn: evaluate does not use it; accepted: data=<source>, "
        "data.<key>=..., trainer.loss=..., trainer.metrics=[...] or trainer.seed=... "
        "(the model is the run's export)"
    )
    assert not list((run / "evaluations").glob("*")) if (run / "evaluations").exists() else True


@pytest.mark.slow
def test_evaluate_with_trust_run_runs_and_records_it(finished_sweep, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(finished_sweep / "0_optimizer.lr=0.001", run)
    saved = yaml.safe_load((run / ".hydra" / "overrides.yaml").read_text())
    (run / ".hydra" / "overrides.yaml").write_text(
        yaml.safe_dump(saved + ["trainer.loss={_target_:tf_keras.losses.SparseCategoricalCrossentropy}"])
    )
    result = command("tfhydra.evaluate", "--trust-run", "--json", str(run), cwd=tmp_path, marker=tmp_path / "MARKER")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Warning: --trust-run: {run} is trusted" in result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["trusted"] is True
    assert json.loads(Path(figures["written_to"]).read_text())["trusted"] is True
    assert figures["split"] == "test"  # evaluate's default: the split nothing chose on (issue 34)
    assert figures["metrics"]["accuracy"] == pytest.approx(
        read_run_record(run)["test"]["metrics"]["accuracy"], abs=1e-6
    )
