"""Screen, then promote, in one command (issue 28, item 3; docs/sweeps.md): every setting of a grid on a share of
the data for a few epochs, then the best `sweep.promote` on all the data; one sweep directory and summary; the
same command again keeps what completed and finishes what is missing. Real Hydra and TensorFlow on digits."""

import csv
import math
import os

import pytest
from conftest import CONFIG_DIR, ROOT, TESTS, last_line, read_run_record, run_cli, run_module

from tfhydra.cli.preflight import check_command_line
from tfhydra.record.monitor import Monitor
from tfhydra.record.run_record import Status
from tfhydra.sweep.jobs import Job
from tfhydra.sweep.stages import Stages, promoted, screen_job

LRS, BATCHES = ["0.001", "0.0005", "0.0001"], ["32", "64"]
# the end-to-end sweep's grid: two by two (four screen jobs, two promoted), the fewest that still rank, leave one
# out and show Hydra's grid order; a job costs its start-up and first epoch's tracing, not its data
GRID_LRS, GRID_BATCHES = ["0.001", "0.0001"], ["32", "64"]
SETTINGS = [[f"optimizer.lr={lr}", f"data.batch_size={b}"] for lr in GRID_LRS for b in GRID_BATCHES]  # grid order
FIXED = [
    "model=mlp",
    "trainer.epochs=3",
    "trainer.steps_per_epoch=2",
    "trainer.deterministic=true",
    "logging.histogram_freq=0",
    "logging.write_graph=false",
    "export.formats=[]",
]
STAGED = ["sweep.screen.fraction=0.1", "sweep.screen.epochs=2", "sweep.promote=2"]
MONITOR = "val_accuracy"
HIGHER, LOWER = Monitor(MONITOR, "max"), Monitor(MONITOR, "min")


def sweep_argv(sweep, *extra):
    return [
        "-m",
        f"optimizer.lr={','.join(GRID_LRS)}",
        f"data.batch_size={','.join(GRID_BATCHES)}",
        *STAGED,
        *FIXED,
        *extra,
        f"hydra.sweep.dir={sweep}",
    ]


def name(number, setting):
    return f"{number}_{','.join(setting)}"


def records(sweep):
    return {p.parent.relative_to(sweep).as_posix(): p.stat().st_mtime_ns for p in sweep.glob("*/*/metrics.json")}


# ---- which screen jobs are promoted, without training (the ranking the summary uses) ---------------------------


def job(num, status, values):
    return Job(num, f"screen/{num}_x", [], status, history=values, stage="screen")


def test_the_best_completed_screen_jobs_are_promoted_ties_by_job_number():
    jobs = [
        job(0, Status.COMPLETED, [0.5, 0.7]),
        job(1, Status.DIVERGED, [0.9, None]),
        job(2, Status.COMPLETED, [0.7]),
        job(3, Status.FAILED, []),
        job(4, Status.COMPLETED, [0.6]),
    ]
    assert [j.num for j in promoted(jobs, HIGHER, 2)] == [0, 2]  # 0.7 twice: the lower job number first
    assert [j.num for j in promoted(jobs, LOWER, 2)] == [0, 4]  # lowest best value (0.5, then 0.6) first
    assert [j.num for j in promoted(jobs, HIGHER, 5)] == [0, 2, 4]  # fewer completed than asked: those


def test_promotion_is_decided_on_validation_whatever_the_test_figures_say():
    """Screen jobs whose test figures rank the other way round: the promoted ones are validation's best."""
    jobs = [job(0, Status.COMPLETED, [0.9]), job(1, Status.COMPLETED, [0.5]), job(2, Status.COMPLETED, [0.7])]
    for screen_job_, test in zip(jobs, (0.1, 0.99, 0.5), strict=True):
        screen_job_.test = test
    assert [j.num for j in promoted(jobs, HIGHER, 2)] == [0, 2]


def test_a_screen_job_runs_its_setting_on_the_screens_share_and_epochs_without_export_or_histograms():
    stages = Stages(0.1, 3, 2)
    assert screen_job(["optimizer.lr=0.001", "trainer.epochs=20", "export.formats=[saved_model]"], stages) == [
        "optimizer.lr=0.001",
        "data.fraction=0.1",
        "trainer.epochs=3",
        "export.formats=[]",
        "logging.histogram_freq=0",
    ]
    assert screen_job(["optimizer.lr=0.001"], Stages(None, 3, 1)) == [
        "optimizer.lr=0.001",
        "trainer.epochs=3",
        "export.formats=[]",
        "logging.histogram_freq=0",
    ]


@pytest.mark.parametrize("given", ["logging.histogram_freq=2", "+logging.histogram_freq=2"])
def test_a_screen_job_keeps_the_histograms_the_command_line_asks_for(given):
    assert screen_job(["optimizer.lr=0.001", given], Stages(0.1, 3, 1)) == [
        "optimizer.lr=0.001",
        given,
        "data.fraction=0.1",
        "trainer.epochs=3",
        "export.formats=[]",
    ]


# ---- mistakes: one line before any directory is made -------------------------------------------------------------


@pytest.mark.parametrize(
    "extra,message",
    [
        (["sweep.promote=2"], "Error: sweep.promote=2: nothing to screen"),
        (
            ["sweep.screen.fraction=0.1"],
            "Error: sweep.screen.fraction=0.1: a screen without sweep.promote promotes nothing",
        ),
        (
            ["sweep.promote=6", "sweep.screen.epochs=1"],
            "Error: sweep.promote=6: the grid has 6 settings: the screen "
            "would leave none out; accepted: an integer in [1, 5]",
        ),
        (
            ["sweep.promote=0", "sweep.screen.epochs=1"],
            "Error: sweep.promote=0: out of range; accepted: null or an integer >= 1",
        ),
        (
            ["sweep.promote=1", "sweep.screen.fraction=1.5"],
            "Error: sweep.screen.fraction=1.5: out of range; accepted: null or a number in (0, 1]",
        ),
        (["sweep.promote=1", "sweep.screen.epochs=2.5"], "Error: sweep.screen.epochs=2.5: not an integer"),
        (["sweep.promote=1,2", "sweep.screen.epochs=1"], "Error: sweep.promote=1,2: several values"),
        (
            ["sweep.promote=2", "sweep.screen.epochs=1", "hydra/sweeper=tfhydra_optuna"],
            "Error: sweep.screen.epochs=1: hydra/sweeper=tfhydra_optuna does not screen and promote",
        ),
        (
            ["sweep.promote=2", "sweep.screen.fraction=0.1", "hydra/sweeper=basic"],
            "Error: sweep.screen.fraction=0.1: hydra/sweeper=basic does not screen and promote",
        ),
    ],
)
def test_a_wrong_screen_or_promotion_is_one_line_before_any_directory(tmp_path, capsys, extra, message):
    """The command line's pre-flight, in-process (what train.py runs first): exit 1, one line, no directory.
    test_a_wrong_promotion_from_the_command_is_one_line_before_any_directory runs one of them as a user would."""
    argv = wrong_argv(tmp_path, extra)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        check_command_line(CONFIG_DIR, "config", argv)
    stderr = capsys.readouterr().err
    assert exited.value.code == 1 and "Traceback" not in stderr, stderr[-2000:]
    assert last_line(stderr).startswith(message), stderr[-2000:]
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "sweep").exists()


def test_a_wrong_promotion_from_the_command_is_one_line_before_any_directory(tmp_path):
    done = run_cli(*wrong_argv(tmp_path, ["sweep.promote=2"]))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert last_line(done.stderr).startswith("Error: sweep.promote=2: nothing to screen"), done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "sweep").exists()


def wrong_argv(tmp_path, extra):
    return [
        "-m",
        f"optimizer.lr={','.join(LRS)}",
        f"data.batch_size={','.join(BATCHES)}",
        *extra,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]


def test_a_single_run_with_the_sweep_keys_says_they_are_ignored(tmp_path):
    done = run_cli(
        "sweep.promote=2", "sweep.screen.epochs=1", "debug=fast", "model=mlp", f"hydra.run.dir={tmp_path / 'run'}"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "Warning: sweep.screen.epochs=1 sweep.promote=2: read by -m sweeps only (screen, then promote); this "
        "single run ignores them"
    ) in done.stderr
    assert read_run_record(tmp_path / "run")["epochs_run"] == 1  # debug=fast's, not the screen's


# ---- end to end --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_screen_then_promote_runs_summarises_and_resumes(tmp_path):
    sweep = tmp_path / "sweep"
    done = run_cli(*sweep_argv(sweep), cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    # the screen: every setting, on the seeded 10 % for the screen's 2 epochs, nothing exported
    screen = {n: read_run_record(sweep / "screen" / name(n, s)) for n, s in enumerate(SETTINGS)}
    for number, record in screen.items():
        assert record["status"] == "completed" and record["epochs_run"] == 2
        assert {"data.fraction=0.1", "trainer.epochs=2"} <= set(record["overrides"])
        assert record["data"]["train_size"] < 200  # of digits' 1437 training examples
        assert not (sweep / "screen" / name(number, SETTINGS[number]) / "export").exists()

    # exactly the top 2 by the monitored value (ties: the lower job number), computed from the records here
    ranking = sorted(screen, key=lambda n: (-screen[n]["best"][MONITOR], n))
    expected = {name(len(SETTINGS) + rank, SETTINGS[n]): n for rank, n in enumerate(ranking[:2])}
    assert sorted(p.name for p in (sweep / "promote").iterdir()) == sorted(expected)
    for directory in expected:
        record = read_run_record(sweep / "promote" / directory)
        assert record["status"] == "completed" and record["epochs_run"] == 3  # the run's own epochs
        assert "data.fraction=0.1" not in record["overrides"] and "trainer.epochs=3" in record["overrides"]
        assert record["data"]["train_size"] > 1000  # all the data
        config = (sweep / "promote" / directory / ".hydra" / "config.yaml").read_text()
        assert "fraction: 1.0" in config

    # one summary: both stages, the promoted settings, the best promoted job and its full-data command
    summary = (sweep / "summary.md").read_text()
    assert (
        "## Promoted: all the data (2 jobs)" in summary
        and "## Screen: 10% of the data for 2 epochs (4 jobs)" in summary
    )
    for number in expected.values():
        assert f"`{' '.join(SETTINGS[number])}` (from screen/{name(number, SETTINGS[number])})" in summary
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert sorted(r["stage"] for r in rows) == ["promote"] * 2 + ["screen"] * 4
    assert {r["directory"]: r["promoted"] for r in rows if r["stage"] == "screen" and r["promoted"]} == {
        f"screen/{name(n, SETTINGS[n])}": f"promote/{d}" for d, n in expected.items()
    }
    best = max(expected, key=lambda d: (read_run_record(sweep / "promote" / d)["best"][MONITOR], -int(d.split("_")[0])))
    lines = done.stdout.splitlines()
    assert f"best job: promote/{best} (" in done.stdout
    reproduce = next(line for line in lines if line.startswith("reproduce: "))
    assert "sweep." not in reproduce and "data.fraction" not in reproduce
    assert all(o in reproduce for o in SETTINGS[expected[best]] + ["trainer.epochs=3"])
    screen_line = next(line for line in lines if line.startswith("screen: 4 settings on 10% of the data for 2 epochs"))
    assert all(f"-> promote/{d}" in screen_line for d in expected)

    # interrupted: a promoted job's record and the last screen job's are gone; `tfhydra-sweep resume` (the recorded
    # command, run again) keeps every other job of both stages as it was and runs those two only
    before = records(sweep)
    assert len(before) == 6
    lost_promote = sweep / "promote" / next(iter(expected))
    lost_screen = sweep / "screen" / name(ranking[-1], SETTINGS[ranking[-1]])
    for directory in (lost_promote, lost_screen):
        (directory / "metrics.json").unlink()
    kept = records(sweep)
    third = run_module(
        "tfhydra.sweep",
        "resume",
        str(sweep),
        cwd=tmp_path,
        timeout=900,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{TESTS}"},
    )  # forked from the test server: its answers, not its start-up
    assert third.returncode == 0, third.stderr[-3000:]
    after = records(sweep)
    assert {k: after[k] for k in kept} == kept  # the four left alone were kept as they were, none trained again
    assert set(after) == set(before) and third.stdout.count("kept: ") == 4
    assert all(f"kept: {k} (" in third.stdout for k in kept), third.stdout[-2000:]
    for directory in (lost_promote, lost_screen):
        assert read_run_record(directory)["status"] == "completed"
    assert sorted(p.name for p in (sweep / "promote").iterdir()) == sorted(expected)  # the same two promoted

    # the full runs' epochs changed: the screen jobs would be the same, the promoted ones not; refused, unchanged
    before = records(sweep)
    other = run_cli(*[a.replace("trainer.epochs=3", "trainer.epochs=4") for a in sweep_argv(sweep)], cwd=tmp_path)
    message = last_line(other.stderr)
    assert other.returncode == 1 and "Traceback" not in other.stderr, other.stderr[-2000:]
    assert (
        message.startswith(f"Error: hydra.sweep.dir={sweep}: its job promote/")
        and "differs in trainer.epochs" in message
    ), message
    assert records(sweep) == before


@pytest.mark.slow
def test_fewer_completed_screen_jobs_than_promote_promotes_those_and_says_so(tmp_path):
    sweep = tmp_path / "sweep"
    fail = "[{_target_:sweep_code.FailAtLearningRate,lr:0.0005},{_target_:sweep_code.FailAtLearningRate,lr:0.0001}]"
    argv = [
        "-m",
        f"optimizer.lr={','.join(LRS)}",
        "sweep.screen.epochs=1",
        "sweep.promote=2",
        *FIXED,
        f"trainer.callbacks={fail}",
        f"hydra.sweep.dir={sweep}",
    ]
    done = run_cli(*argv, cwd=tmp_path, timeout=900)
    assert done.returncode == 1  # two screen jobs failed: a sweep with failed jobs says so
    assert (sweep / "promote" / "3_optimizer.lr=0.001").is_dir()
    assert [p.name for p in (sweep / "promote").iterdir()] == ["3_optimizer.lr=0.001"]
    assert "promoted 1 instead of sweep.promote=2: only 1 of the 3 screen jobs completed" in done.stdout
    assert last_line(done.stderr).startswith(
        "Error: 2 of 4 jobs did not complete: screen/1_optimizer.lr=0.0005 "
        "(failed), screen/2_optimizer.lr=0.0001 (failed)"
    ), done.stderr[-2000:]
    record = read_run_record(sweep / "promote" / "3_optimizer.lr=0.001")
    assert record["status"] == "completed" and record["epochs_run"] == 3 and math.isfinite(record["best"][MONITOR])


@pytest.mark.slow
def test_the_stages_run_on_another_launcher(tmp_path):
    """The stages are the sweeper's: the joblib launcher runs them in its worker processes, two at a time (both
    screen jobs at once)."""
    sweep = tmp_path / "sweep"
    argv = [
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        f"optimizer.lr={','.join(GRID_LRS)}",
        "sweep.screen.fraction=0.2",
        "sweep.screen.epochs=1",
        "sweep.promote=1",
        *FIXED,
        f"hydra.sweep.dir={sweep}",
    ]
    done = run_cli(*argv, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    screen = {n: read_run_record(sweep / "screen" / f"{n}_optimizer.lr={lr}") for n, lr in enumerate(GRID_LRS)}
    assert all(r["status"] == "completed" and r["epochs_run"] == 1 for r in screen.values())
    best = sorted(screen, key=lambda n: (-screen[n]["best"][MONITOR], n))[0]
    assert [p.name for p in (sweep / "promote").iterdir()] == [f"2_optimizer.lr={GRID_LRS[best]}"]
    assert read_run_record(sweep / "promote" / f"2_optimizer.lr={GRID_LRS[best]}")["epochs_run"] == 3
