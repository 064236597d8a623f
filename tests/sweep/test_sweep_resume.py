"""Re-running a sweep into its directory continues it (issue 15): a 4-job sweep whose launching process is
SIGKILLed while its second job trains ends, with `tfhydra-sweep resume`, with 4 completed jobs, and the
record of the job completed before the kill is byte-identical; the same directory with another model is
refused before any job starts and nothing in it changes."""

import hashlib

import pytest
from conftest import ROOT, last_line, read_run_record, run_cli, run_module
from shared_runs import copy_run
from test_sweep_interrupted import JOBS, SWEEP, copy_killed, killed_sweep  # noqa: F401  (a fixture)
from test_sweep_presets import joblib_argv, joblib_sweep  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow


def snapshot(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_killed_sweep_is_continued_and_a_different_one_refused(
    killed_sweep,  # noqa: F811  (pytest passes the fixture imported from test_sweep_interrupted)
    tmp_path,
):
    sweep, kept, _ = copy_killed(killed_sweep, tmp_path / "home")
    tmp_path = tmp_path / "home"  # the folder the sweep ran in: its directory is relative to it
    # the sweep ran with hydra/launcher=basic: resume takes hydra settings only from its own command line (issue 35)
    resumed = run_module(  # forked from the test server: the tool's answers, not its start-up
        "tfhydra.sweep",
        "resume",
        str(sweep),
        "hydra/launcher=basic",
        cwd=tmp_path,
        timeout=900,
        # this checkout first: resume execs `python -m tfhydra`, which would otherwise import the installed one
        env={**__import__("os").environ, "PYTHONPATH": f"{ROOT}{__import__('os').pathsep}{ROOT / 'tests'}"},
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"kept: {JOBS[0]}" in resumed.stdout
    assert (sweep / JOBS[0] / "metrics.json").read_bytes() == kept  # kept byte for byte
    assert [read_run_record(sweep / job)["status"] for job in JOBS] == ["completed"] * 4
    log = (sweep / JOBS[1] / "train.log").read_text()  # job 1 ran again: from its state, or over if none was saved yet
    assert "resuming from the saved state" in log or "no state was saved before the earlier attempt ended" in log
    # how each job started, in its record; the kept one says it in its train.log (its record is never rewritten)
    started = [read_run_record(sweep / job)["resumed"] for job in JOBS]
    assert started[0]["kind"] == "fresh" and [s["kind"] for s in started[2:]] == ["fresh", "fresh"]
    assert (started[1]["kind"], started[1]["epoch"] > 0) in (("saved_state", True), ("fresh", False)), started[1]
    assert ("no state was saved" in started[1]["reason"]) == (started[1]["kind"] == "fresh")
    assert (sweep / JOBS[0] / "train.log").read_text().count("start: kept (completed in an earlier run (") == 1
    summary = (sweep / "summary.md").read_text()
    assert "4 jobs: 4 completed" in summary

    before = snapshot(sweep)
    other = run_cli("-m", *[a for a in SWEEP if a not in ("-m", "model=mlp")], "model=cnn", f"hydra.sweep.dir={sweep}")
    message = last_line(other.stderr)
    assert other.returncode == 1 and "Traceback" not in other.stderr
    assert message.startswith(
        f"Error: hydra.sweep.dir={sweep}: its job {JOBS[0]} was run with another config: it differs in model."
    ), message
    assert snapshot(sweep) == before  # nothing rewritten


def test_a_finished_joblib_sweep_run_again_keeps_every_job(
    joblib_sweep,  # noqa: F811  (pytest passes the fixture imported from test_sweep_presets)
    tmp_path,
):
    """Under the joblib launcher each worker checks its own job directory: nothing trains twice. The first run is
    the session's shared joblib sweep (test_sweep_presets.py), run again here into a copy of it."""
    sweep = copy_run(joblib_sweep, tmp_path / "sweep")
    argv = joblib_argv(sweep)
    jobs = sorted(d for d in sweep.iterdir() if (d / "metrics.json").is_file())
    records = {d.name: (d / "metrics.json").read_bytes() for d in jobs}
    assert len(records) == 2
    again = run_cli(*argv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert {d.name: (d / "metrics.json").read_bytes() for d in jobs} == records
    assert all(f"kept: {name}" in again.stdout for name in records), again.stdout[-2000:]
    for job in jobs:  # decided once in each worker, said once in the job's log; trained once, from nothing
        assert (job / "train.log").read_text().count("start: kept (completed in an earlier run (2 epoch(s))") == 1
        assert read_run_record(job)["resumed"] == {
            "kind": "fresh",
            "epoch": 0,
            "reason": "a new run: nothing saved in its directory",
        }
