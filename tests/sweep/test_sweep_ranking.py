"""The sweep ranks each job by its record's best (issue 36 item 2; docs/sweeps.md, "How jobs are ranked"): the epoch
the job exported, chosen among the epochs that may be exported (after pruning has reached its target), never an
earlier epoch of a history. The summary, its files, a staged sweep's promotion and the end line all say that
epoch. Hand-made sweep directories first (milliseconds), then a real pruning sweep on digits (slow)."""

import csv
import json

import pytest
import yaml
from conftest import read_run_record, run_cli

from tfhydra.record.monitor import Monitor
from tfhydra.record.run_record import RunRecord, Status
from tfhydra.sweep.jobs import recorded_best
from tfhydra.sweep.stages import Stages, promoted, screen_jobs
from tfhydra.sweep.summary import summarize

MONITOR = "val_accuracy"
BASIC = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
# Two pruned jobs: job 0's best epoch of its whole history is epoch 1 (0.95, before pruning reached its target);
# the record, counting from epoch 2 on, chose epoch 3. Job 1 is worse before pruning, better after it.
PRUNED = {0: ([0.95, 0.5, 0.6], 3), 1: ([0.8, 0.7, 0.75], 3)}


def write_record(job, num, overrides, history, best_epoch, status="completed"):
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": num}}}))
    epochs = [{MONITOR: v, "loss": 1.0} for v in history]
    best = {"epoch": best_epoch, **epochs[best_epoch - 1]} if best_epoch else None
    (job / "metrics.json").write_text(
        json.dumps(
            {
                "schema_version": 2,
                "status": status,
                "monitor": MONITOR,
                "monitor_mode": "max",
                "overrides": overrides,
                "history": epochs,
                "best": best,
                "final": {"epoch": len(epochs), **epochs[-1]},
                "wall_seconds": 1.0,
                "exported": {"epoch": best_epoch, "weights": "checkpoints/best.weights.h5", "reason": None},
            }
        )
    )


def hand_made(tmp_path, staged):
    sweep = tmp_path / ("staged" if staged else "sweep")
    sweep.mkdir()
    config = {
        "trainer": {"monitor": MONITOR, "monitor_mode": "max"},
        "hydra": {
            "sweeper": {"_target_": BASIC, "params": None},
            "overrides": {"task": ["optimizer.lr=1,2", "compression=prune"]},
        },
    }
    if staged:
        config["sweep"] = {"promote": 1, "screen": {"fraction": None, "epochs": 3}}
    (sweep / "multirun.yaml").write_text(yaml.safe_dump(config))
    for num, (history, best_epoch) in PRUNED.items():
        overrides = [f"optimizer.lr={num + 1}", "compression=prune"]
        if staged:
            overrides += ["trainer.epochs=3", "export.formats=[]", "logging.histogram_freq=0"]
        folder = sweep / "screen" if staged else sweep
        write_record(folder / f"{num}_optimizer.lr={num + 1}", num, overrides, history, best_epoch)
    return sweep


def test_the_summary_ranks_and_names_the_epoch_each_record_chose(tmp_path):
    sweep = hand_made(tmp_path, staged=False)
    summary = summarize(sweep)
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [(r["rank"], r["job"], r["best_val_accuracy"], r["best_epoch"]) for r in rows] == [
        ("1", "1", "0.75", "3"),
        ("2", "0", "0.6", "3"),
    ]  # the history alone would rank job 0 first, at epoch 1
    assert summary.best.name == "1_optimizer.lr=2"
    assert "best job: 1_optimizer.lr=2 (val_accuracy=0.75 at epoch 3)" in summary.report()
    markdown = (sweep / "summary.md").read_text()
    assert "(higher is better)" in markdown and "| 0.75 | 3 |" in markdown and "| 0.95 |" not in markdown


def test_a_staged_sweep_promotes_by_the_records_best(tmp_path):
    """Both ways a promotion is decided: the sweeper's (screen_jobs, then promoted) and the summary's."""
    sweep = hand_made(tmp_path, staged=True)
    stages = Stages(None, 3, 1)
    grid = [[f"optimizer.lr={n + 1}", "compression=prune"] for n in PRUNED]
    chosen = promoted(screen_jobs(sweep, MONITOR, grid, stages), Monitor(MONITOR, "max"), stages.promote)
    assert [j.name for j in chosen] == ["screen/1_optimizer.lr=2"]
    summary = summarize(sweep)
    assert [(s.name, p.num, p.status) for s, p in summary.promotions] == [
        ("screen/1_optimizer.lr=2", 2, Status.NOT_STARTED)
    ]
    assert summary.promotion_lines()[0].endswith(
        "promoted to all the data: screen/1_optimizer.lr=2 (val_accuracy=0.75) -> job 2"
    )


def test_without_a_records_best_the_history_is_ranked_as_before(tmp_path):
    """A job killed before its record said (`running`, or no block at all): its history, every epoch."""
    sweep = hand_made(tmp_path, staged=False)
    record = sweep / "0_optimizer.lr=1" / "metrics.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "best": None}))
    summary = summarize(sweep)
    assert [(j.name, j.rank, j.best(summary.ranking)) for j in summary.jobs] == [
        ("0_optimizer.lr=1", 1, (0.95, 1)),
        ("1_optimizer.lr=2", 2, (0.75, 3)),
    ]


def test_the_records_best_is_read_only_when_the_record_made_its_choice():
    best = {"epoch": 3, MONITOR: 0.6}
    assert recorded_best(RunRecord(status=Status.COMPLETED, monitor=MONITOR, best=best)) == (0.6, 3)
    assert recorded_best(RunRecord(status=Status.FAILED, monitor=MONITOR, best=best)) == (0.6, 3)
    assert recorded_best(RunRecord(status=Status.RUNNING, monitor=MONITOR, best=best)) is None  # a kill's leftovers
    assert recorded_best(RunRecord(status=Status.COMPLETED, monitor=MONITOR, best=None)) is None
    no_figure = {"epoch": 2, MONITOR: None}  # every epoch NaN: JSON keeps null
    assert recorded_best(RunRecord(status=Status.DIVERGED, monitor=MONITOR, best=no_figure)) == (None, None)


# ---- a real pruning sweep ------------------------------------------------------------------------------------------

# An MLP on digits: 2 epochs unpruned, pruned during epoch 3 to the target, which job 0 (0.99) cannot survive and job
# 1 (0.9) can. Both jobs' first two epochs are the same training (same seed, deterministic), so the whole history
# ties them on an unpruned epoch (job 0 first); their records rank job 1 first.
PRUNE = [
    "model=mlp",
    "trainer.epochs=4",
    "compression=prune",
    "compression.begin_epoch=2",
    "compression.end_epoch=3",
    "trainer.deterministic=true",
    "logging.histogram_freq=0",
    "logging.write_graph=false",
]


@pytest.mark.slow
def test_a_pruning_sweep_summarises_and_promotes_the_exported_epoch(tmp_path):
    sweep = tmp_path / "sweep"
    done = run_cli(
        "-m",
        "compression.target_sparsity=0.99,0.9",
        "sweep.screen.epochs=4",
        "sweep.promote=1",
        *PRUNE,
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    screen = {
        n: read_run_record(sweep / "screen" / f"{n}_compression.target_sparsity={s}")
        for n, s in enumerate(("0.99", "0.9"))
    }
    monitor = Monitor(MONITOR, "max")
    whole = {n: monitor.best_of_epochs(r["history"]) for n, r in screen.items()}
    for n, record in screen.items():  # the records count from the first epoch at the target sparsity (the third)
        assert record["best"]["epoch"] >= 3
        assert record["best"][MONITOR] == monitor.best_of_epochs(record["history"], from_epoch=2)[0]
        assert whole[n][1] <= 2 and whole[n][0] > record["best"][MONITOR]  # a ramp epoch was better, never exported
    assert sorted(whole, key=lambda n: (monitor.sort_key(whole[n][0]), n))[0] == 0  # what ranking histories chose
    assert screen[1]["best"][MONITOR] > screen[0]["best"][MONITOR]

    promoted_dir = sweep / "promote" / "2_compression.target_sparsity=0.9"
    assert [p.name for p in (sweep / "promote").iterdir()] == [promoted_dir.name]
    final = read_run_record(promoted_dir)
    assert final["status"] == "completed" and final["exported"]["epoch"] == final["best"]["epoch"] >= 3
    assert final["exports"] and (promoted_dir / "export").is_dir()  # the weights of that epoch, exported
    rows = {r["directory"]: r for r in csv.DictReader((sweep / "summary.csv").open())}
    for n, record in screen.items():
        row = rows[f"screen/{n}_compression.target_sparsity={('0.99', '0.9')[n]}"]
        assert (row["best_epoch"], float(row[f"best_{MONITOR}"])) == (
            str(record["best"]["epoch"]),
            pytest.approx(record["best"][MONITOR]),
        )
    assert rows[f"promote/{promoted_dir.name}"]["best_epoch"] == str(final["exported"]["epoch"])
    assert f"promoting to all the data: screen/1_compression.target_sparsity=0.9 ({MONITOR}=" in done.stdout
    assert (
        f"best job: promote/{promoted_dir.name} ({MONITOR}=" in done.stdout
        and f"at epoch {final['exported']['epoch']}" in done.stdout
    )


# ---- ties and the task's headline (issue 55 item 4) ---------------------------------------------------------------


def write_epochs(job, num, overrides, epochs, monitor, mode, task=None, test=None):
    """A completed job whose record chose its best from `epochs` as a run does (tfhydra/record/report.py)."""
    from tfhydra.record.report import epoch_summary

    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": num}}}))
    record = RunRecord(
        status=Status.COMPLETED,
        monitor=monitor,
        monitor_mode=mode,
        overrides=overrides,
        history=epochs,
        task=task,
        test=None if test is None else {"split": "test", "examples": 10, "metrics": test},
        wall_seconds=1.0,
    )
    record.update(**epoch_summary(epochs, monitor, mode))
    record.write(job)


def basic_sweep(tmp_path, monitor, mode, jobs):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "trainer": {"monitor": monitor, "monitor_mode": mode},
                "hydra": {"sweeper": {"_target_": BASIC, "params": None}, "overrides": {"task": ["optimizer.lr=1,2"]}},
            }
        )
    )
    for num, (epochs, extra) in enumerate(jobs):
        overrides = [f"optimizer.lr={num + 1}"]
        write_epochs(sweep / f"{num}_optimizer.lr={num + 1}", num, overrides, epochs, monitor, mode, **extra)
    return sweep


def test_jobs_tied_on_the_monitor_rank_by_their_val_loss_and_the_summary_says_so(tmp_path):
    tied = [
        ([{MONITOR: 0.9778, "val_loss": 0.3}], {}),
        (
            [{MONITOR: 0.9, "val_loss": 0.5}, {MONITOR: 0.9778, "val_loss": 0.1}, {MONITOR: 0.9778, "val_loss": 0.05}],
            {},
        ),
    ]
    sweep = basic_sweep(tmp_path, MONITOR, "max", tied)
    summary = summarize(sweep)
    assert [(j.name, j.rank, j.best(summary.ranking)) for j in summary.jobs] == [
        ("1_optimizer.lr=2", 1, (0.9778, 3)),  # its own tie: epochs 2 and 3, the lower val_loss kept
        ("0_optimizer.lr=1", 2, (0.9778, 1)),
    ]
    report = summary.report()
    assert (
        "best job: 1_optimizer.lr=2 (val_accuracy=0.9778 at epoch 3 "
        "(epochs 2, 3 tied at val_accuracy=0.9778: epoch 3 kept, the lowest val_loss))"
    ) in report
    note = "jobs 1_optimizer.lr=2, 0_optimizer.lr=1 tie at val_accuracy=0.9778: ranked by the lower val_loss"
    assert note in report and note in (sweep / "summary.md").read_text()


def test_a_regression_sweep_leads_with_rmse_and_r2(tmp_path):
    task = {"name": "regression", "standardize": True, "headline": ["rmse", "r2"]}
    jobs = [
        (
            [{"val_loss": 9.0, "val_rmse": 3.0, "val_r2": 0.5}],
            {"task": task, "test": {"loss": 10.0, "rmse": 3.2, "r2": 0.45}},
        ),
        (
            [{"val_loss": 4.0, "val_rmse": 2.0, "val_r2": 0.8}],
            {"task": task, "test": {"loss": 4.4, "rmse": 2.1, "r2": 0.78}},
        ),
    ]
    sweep = basic_sweep(tmp_path, "val_loss", "min", jobs)
    summary = summarize(sweep)
    assert summary.headline == ("rmse", "r2")
    assert (
        "best job: 1_optimizer.lr=2 (val_rmse=2 val_r2=0.8 at epoch 1, chosen by val_loss=4; "
        "test rmse=2.1 r2=0.78, not used to choose)"
    ) in summary.report()
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    header = list(rows[0])
    assert header[3:9] == ["best_val_rmse", "best_val_r2", "test_rmse", "test_r2", "best_val_loss", "best_epoch"]
    assert [(r["rank"], r["best_val_rmse"], r["test_r2"], r["best_val_loss"], r["test_loss"]) for r in rows] == [
        ("1", "2.0", "0.78", "4.0", "4.4"),
        ("2", "3.0", "0.45", "9.0", "10.0"),
    ]
    markdown = (sweep / "summary.md").read_text()
    assert "| status | val_rmse | val_r2 | test rmse | test r2 | best val_loss |" in markdown
    assert "| completed | 2 | 0.8 | 2.1 | 0.78 | 4 | 1 |" in markdown
