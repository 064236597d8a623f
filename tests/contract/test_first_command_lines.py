"""Issue 24, item 4: command lines and project configs a new user tries, each one line (no traceback)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, last_line, read_run_record, run_cli


def project(tmp_path, primary: str | None = None, option: str | None = None):
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "config.yaml").write_text(primary or "defaults: [tfhydra, _self_]\n")
    if option is not None:
        (conf / "model" / "tiny.yaml").write_text(option)
    return conf


@pytest.mark.parametrize(
    "primary,option,argv,where",
    [
        ("defaults: [tfhydra, _self_]\ntrainer: {epochs: 1\n", None, [], "conf/config.yaml:3"),
        (None, "name: mlp\nunits: [8\n", ["model=tiny"], "conf/model/tiny.yaml:3"),
        (None, "name: mlp\n  units: 8\n", ["model=tiny"], "conf/model/tiny.yaml:2"),
    ],
)
def test_a_yaml_error_in_the_projects_conf_names_the_file_and_line(tmp_path, primary, option, argv, where):
    project(tmp_path, primary, option)
    result = run_cli(*argv, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    message = last_line(result.stderr)
    assert message.startswith(f"Error: {tmp_path / where}: not readable YAML ("), message
    assert message.endswith("accepted: a YAML file Hydra can compose (a mapping of keys to values)")
    assert not (tmp_path / "run").exists()


def test_multirun_with_cfg_is_one_line():
    result = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "-m", "--cfg", "job", "optimizer.lr=1e-3,1e-4"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert last_line(result.stderr) == (
        "Error: --cfg: Hydra takes only one of them; accepted: -m to run a sweep, or "
        "--cfg without -m to print one job's config"
    )


def look_further(text: str) -> str:
    return next(line for line in text.splitlines() if "look further:" in line)


@pytest.mark.slow
def test_a_finished_command_ends_with_where_to_look_further(tmp_path):
    """The end summary as the command prints it (the decision per export: the test below)."""
    run = tmp_path / "run"
    result = run_cli(
        "model=mlp",
        "trainer.epochs=1",
        "logging.histogram_freq=0",
        "export.formats=[saved_model]",
        f"hydra.run.dir={run}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert read_run_record(run)["status"] == "completed"
    hint = look_further(result.stdout + result.stderr)
    assert "tfhydra.evaluate" in hint or "tfhydra-evaluate" in hint, hint
    assert hint.endswith("the record: run/metrics.json"), hint


@pytest.mark.parametrize(
    "exports,hints_evaluate",
    [
        ({}, False),
        ({"keras": "export/model.keras"}, False),
        ({"saved_model": "export/saved_model"}, True),
        ({"tflite": "export/tflite/model.tflite"}, True),
    ],
)
def test_the_end_summary_suggests_evaluate_only_for_a_run_with_a_saved_model_or_tflite(
    tmp_path, monkeypatch, caplog, hydra_job, exports, hints_evaluate
):
    """console.end_summary, as a finished job calls it, on the record the run wrote."""
    import logging

    from tfhydra.cli.console import end_summary
    from tfhydra.record.run_record import RunRecord

    hydra_job(["model=mlp"])
    run = tmp_path / "job"
    run.mkdir()
    RunRecord(run_dir=str(run), monitor="val_accuracy", status="completed", exports=exports or None).write(run)
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="tfhydra"):
        end_summary()
    hint = look_further("\n".join(r.getMessage() for r in caplog.records))
    assert ("tfhydra.evaluate" in hint or "tfhydra-evaluate" in hint) is hints_evaluate, hint
    assert hint.endswith("the record: job/metrics.json"), hint
