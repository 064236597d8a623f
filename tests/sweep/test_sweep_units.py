"""The sweep room's parts on their own: job names, thread defaults, a failing job's record, and the
summary of a sweep directory built by hand (no training, no subprocess)."""

import csv
import json
import math
import sys

import pytest
import yaml
from conftest import CONFIG_DIR, read_run_record
from omegaconf import OmegaConf, open_dict
from tb_events import read_events


def test_job_dirnames_keep_only_swept_overrides_and_never_nest_folders(monkeypatch):
    from tfhydra.config.jobnames import SWEPT_KEYS_ENV, job_dirname

    monkeypatch.delenv(SWEPT_KEYS_ENV, raising=False)
    argv = ["-m", "optimizer.lr=1e-3,5e-4", "data.batch_size=32,64", "trainer.epochs=2"]
    assert (
        job_dirname(["optimizer.lr=0.0005", "data.batch_size=64", "trainer.epochs=2"], argv)
        == "optimizer.lr=0.0005,data.batch_size=64"
    )
    assert (
        job_dirname(["data.path=/data/a b/c:d", "x=1"], ["-m", "data.path=/data/a b/c:d,/e", "x=1"])
        == "data.path=_data_a_b_c_d"
    )
    # A worker process of a parallel launcher has another sys.argv: the swept keys come from the environment.
    monkeypatch.setenv(SWEPT_KEYS_ENV, json.dumps(["data.batch_size"]))
    monkeypatch.setattr(sys, "argv", ["loky_worker.py", "--pipe", "3"])
    assert job_dirname(["optimizer.lr=0.001", "data.batch_size=64"]) == "data.batch_size=64"


def test_a_job_config_carries_its_swept_keys_and_an_absolute_sweep_dir(monkeypatch, tmp_path):
    """What the sweep callback adds to hydra.overrides.hydra, composed as a launcher composes each job: the
    job's directory is named from its own config, in a process with neither the variable nor the command line
    (a Ray worker)."""
    from tfhydra.config.jobnames import SWEPT_KEYS_ENV, current_swept_keys
    from tfhydra.platform.command import command_handover
    from tfhydra.sweep.handover import handover_overrides
    from tfhydra.sweep.kind import launcher_kind

    monkeypatch.delenv(SWEPT_KEYS_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", ["default_worker.py", "--node-ip-address=127.0.0.1"])
    monkeypatch.chdir(tmp_path)
    ray = launcher_kind(
        {"hydra": {"launcher": {"_target_": "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"}}}
    )
    handed = handover_overrides({"data.batch_size", "optimizer.lr"}, "outputs/it's a sweep", ray)
    cfg = hydra_job_config([*handed, "hydra.job.num=3", "optimizer.lr=0.001", "data.batch_size=64", "trainer.epochs=2"])
    assert cfg.hydra.job.env_set[SWEPT_KEYS_ENV] == '["data.batch_size", "optimizer.lr"]'
    assert cfg.hydra.sweep.dir == str(tmp_path / "outputs" / "it's a sweep")
    assert cfg.hydra.sweep.subdir == "3_optimizer.lr=0.001,data.batch_size=64"
    assert current_swept_keys(hydra_node=cfg.hydra) == {"data.batch_size", "optimizer.lr"}
    assert cfg.hydra.job.env_set.TFHYDRA_COMMAND == command_handover()  # the record's `command` (test_scheduler.py)
    keys_and_command = ["++hydra.job.env_set.TFHYDRA_SWEPT_KEYS='[\"x\"]'", handed[1]]  # other launchers: no directory
    assert handover_overrides({"x"}, "/abs/sweep", ray) == handover_overrides({"x"}, "outputs/x") == keys_and_command


def hydra_job_config(overrides, mode="MULTIRUN", output_dir="/tmp/job"):
    from hydra import compose, initialize_config_dir
    from hydra.types import RunMode

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.mode = RunMode[mode]
        cfg.hydra.runtime.output_dir = str(output_dir)
        cfg.hydra.overrides.task = [o for o in overrides if not o.lstrip("+").startswith("hydra")]
    return cfg


@pytest.fixture
def as_hydra_job():
    """Make HydraConfig hold a config, as it does inside a job; restored afterwards."""
    from hydra.core.hydra_config import HydraConfig

    previous = HydraConfig.instance().cfg

    def _set(cfg):
        HydraConfig.instance().set_config(cfg)
        return cfg

    yield _set
    HydraConfig.instance().cfg = previous


@pytest.mark.parametrize(
    "n_jobs, expected", [(2, lambda cores: max(1, cores // 2)), (-1, lambda cores: 1), (1, lambda cores: 0)]
)
def test_threads_default_to_cores_divided_by_parallel_jobs_under_joblib(as_hydra_job, n_jobs, expected):
    from tfhydra.platform.runtime import available_cores
    from tfhydra.sweep.kind import auto_threads, parallel_jobs

    as_hydra_job(hydra_job_config(["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n_jobs}"]))
    assert parallel_jobs() == (n_jobs if n_jobs > 0 else available_cores())
    assert auto_threads() == expected(available_cores())
    as_hydra_job(hydra_job_config([]))  # the basic launcher runs one job at a time: TensorFlow decides
    assert parallel_jobs() == 1 and auto_threads() == 0


def test_a_job_that_raises_before_training_is_recorded_and_returns_nan(as_hydra_job, tmp_path, monkeypatch):
    """A ConfigError only a builder can see (no complete batch) is the job's one-line error, not the sweep's end."""
    from tfhydra.config.errors import ConfigError
    from tfhydra.config.jobnames import SWEPT_KEYS_ENV
    from tfhydra.sweep.trial import run_trial

    monkeypatch.setenv(SWEPT_KEYS_ENV, json.dumps(["data.batch_size"]))
    job_dir = tmp_path / "0_data.batch_size=4096"
    cfg = as_hydra_job(hydra_job_config(["data.batch_size=4096", "data.drop_remainder=true"], output_dir=job_dir))

    def run_job(cfg, callbacks=()):
        raise ConfigError("data.batch_size", 4096, "at most 1437 (the training examples)", "no complete training batch")

    assert math.isnan(run_trial(cfg, run_job))
    record = read_run_record(job_dir)
    assert record["status"] == "failed" and record["epochs_run"] == 0
    assert record["error"] == (
        "data.batch_size=4096: no complete training batch; accepted: at most 1437 (the training examples)"
    )
    assert record["overrides"] == ["data.batch_size=4096", "data.drop_remainder=true"]
    events = read_events(job_dir / "tensorboard" / "validation")  # the trial is in TensorBoard, with its end
    assert events["scalars"] == {}
    assert sorted(p.name for p in (job_dir / "tensorboard").iterdir()) == ["validation"]  # no run of its own
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(job_dir / "tensorboard" / "validation"))
    accumulator.Reload()
    assert set(accumulator.Tags()["tensors"]) == {"_hparams_/session_start_info", "_hparams_/session_end_info"}


def test_a_trials_best_and_test_figures_are_lines_tensorboard_draws(tmp_path):
    """A single point per run is drawn as an empty Time Series card: the best is the best so far at each epoch
    (ending at the record's best), the test figure a flat line over the run; a history whose running best is not
    the record's (a phase that chose from later epochs) draws the best flat."""
    from tfhydra.sweep.hparams import Trial

    history = [{"val_accuracy": 0.5}, {"val_accuracy": 0.7}, {"val_accuracy": 0.6}, {"val_accuracy": 0.65}]
    Trial(tmp_path / "a", "a", {"optimizer.lr": 0.001}).end("completed", "val_accuracy", 0.7, 2, 0.68, history)
    scalars = read_events(tmp_path / "a")["scalars"]
    assert [(s, pytest.approx(v)) for s, v in scalars["best_val_accuracy"]] == [(0, 0.5), (1, 0.7), (2, 0.7), (3, 0.7)]
    assert [(s, pytest.approx(v)) for s, v in scalars["test_accuracy"]] == [(0, 0.68), (3, 0.68)]
    losses = [{"val_loss": 0.9}, {"val_loss": 0.4}, {"val_loss": 0.3}]  # chosen from epoch 3 on, by the lower loss
    Trial(tmp_path / "b", "b", {}).end("completed", "val_loss", 0.3, 3, None, losses, "min")
    scalars = read_events(tmp_path / "b")["scalars"]
    assert [(s, pytest.approx(v)) for s, v in scalars["best_val_loss"]] == [(0, 0.9), (1, 0.4), (2, 0.3)]
    assert "test_loss" not in scalars
    Trial(tmp_path / "c", "c", {}).end("completed", "val_loss", 0.35, 3, 0.4, losses, "min")
    assert [s for s, _ in read_events(tmp_path / "c")["scalars"]["best_val_loss"]] == [0, 2]


def write_job(sweep, num, name, overrides, status=None, history=(), wall=None, error=None, partial=False, test=None):
    """A job as it lands on disk; without `test` its record predates the test split (no schema_version), with it a
    version-2 record whose test block says `test` is the test loss."""
    job = sweep / f"{num}_{name}"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": num}}}))
    epochs = [{"val_loss": v, "loss": 1.0} for v in history]
    if partial:  # killed mid-run: only the per-epoch record beside the resumable state
        (job / "checkpoints").mkdir()
        (job / "checkpoints" / "history.json").write_text(json.dumps({"epochs": epochs, "train_seconds": []}))
    elif status:
        record = {
            "status": status,
            "history": epochs,
            "wall_seconds": wall,
            "monitor": "val_loss",
            "monitor_mode": "min",
            "overrides": overrides,
            "error": error,
        }
        if test is not None:
            record.update(schema_version=2, test={"split": "test", "examples": 10, "metrics": {"loss": test}})
        (job / "metrics.json").write_text(json.dumps(record))
    return job


@pytest.fixture
def hand_made_sweep(tmp_path):
    """Five jobs of `optimizer.lr=1,2,3,4,5` ranked by val_loss (lower is better)."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "trainer": {"monitor": "val_loss", "monitor_mode": "min"},
                "hydra": {
                    "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None},
                    "overrides": {"task": ["optimizer.lr=1,2,3,4,5", "trainer.epochs=3"]},
                },
            }
        )
    )
    write_job(sweep, 0, "optimizer.lr=1", ["optimizer.lr=1", "trainer.epochs=3"], "completed", [0.9, 0.5, 0.7], 10.0)
    write_job(sweep, 1, "optimizer.lr=2", ["optimizer.lr=2", "trainer.epochs=3"], "completed", [0.8, 0.4, 0.45], 12.5)
    write_job(sweep, 2, "optimizer.lr=3", ["optimizer.lr=3", "trainer.epochs=3"], "diverged", [0.3], 3.0, error=None)
    write_job(sweep, 3, "optimizer.lr=4", ["optimizer.lr=4", "trainer.epochs=3"], history=[0.6, 0.55], partial=True)
    return sweep


def test_the_summary_ranks_completed_jobs_by_the_monitored_metric_and_lists_the_rest(hand_made_sweep):
    from tfhydra.sweep.summary import summarize

    summary = summarize(hand_made_sweep)
    assert (summary.monitor, summary.mode, summary.swept_keys) == ("val_loss", "min", ["optimizer.lr"])
    rows = list(csv.DictReader((hand_made_sweep / "summary.csv").open()))
    assert [(r["rank"], r["job"], r["status"]) for r in rows] == [
        ("1", "1", "completed"),
        ("2", "0", "completed"),
        ("", "2", "diverged"),
        ("", "3", "interrupted"),
        ("", "4", "not started"),
    ]
    assert [(r["best_val_loss"], r["best_epoch"], r["final_val_loss"], r["epochs"]) for r in rows[:2]] == [
        ("0.4", "2", "0.45", "3"),
        ("0.5", "2", "0.7", "3"),
    ]
    assert rows[3]["best_val_loss"] == "0.55" and rows[3]["epochs"] == "2"  # from checkpoints/history.json
    assert rows[4]["overrides"] == "optimizer.lr=5" and rows[4]["directory"] == ""
    assert rows[2]["error"] == "the training loss diverged"
    markdown = (hand_made_sweep / "summary.md").read_text()
    assert "python train.py optimizer.lr=2 trainer.epochs=3" in markdown and "(lower is better)" in markdown
    assert summary.unsuccessful and summary.best.name == "1_optimizer.lr=2"
    assert "best job: 1_optimizer.lr=2 (val_loss=0.4 at epoch 2)" in summary.report()
    assert not list(hand_made_sweep.glob(".*.partial"))  # written atomically


def test_without_matplotlib_the_plot_is_skipped_with_a_note(hand_made_sweep, monkeypatch):
    from tfhydra.sweep.summary import summarize

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    summary = summarize(hand_made_sweep)
    assert not (hand_made_sweep / "summary.png").exists()
    note = "summary.png skipped: matplotlib is not installed (pip install 'tfhydra[sweeps]')"
    assert note in summary.report() and note in (hand_made_sweep / "summary.md").read_text()
    assert "](summary.png)" not in (hand_made_sweep / "summary.md").read_text()


def test_a_search_sweep_without_multirun_yaml_takes_its_swept_keys_from_what_differs(tmp_path):
    from tfhydra.sweep.summary import summarize

    sweep = tmp_path / "optuna"
    sweep.mkdir()
    write_job(sweep, 0, "a", ["hparams_search=optuna", "optimizer.lr=0.003", "data.batch_size=64"], "completed", [0.2])
    write_job(sweep, 1, "b", ["hparams_search=optuna", "optimizer.lr=0.0002", "data.batch_size=64"], "completed", [0.1])
    summary = summarize(sweep)
    assert summary.swept_keys == ["optimizer.lr"] and summary.best.swept == ["optimizer.lr=0.0002"]
    assert (summary.monitor, summary.mode) == ("val_loss", "min")  # from the jobs' metrics.json


def test_limited_steps_cut_both_splits_and_repeat_the_training_data():
    import tensorflow as tf

    from tfhydra.data.pipeline import build_datasets, limit_steps

    cfg = OmegaConf.load(CONFIG_DIR / "tfhydra.yaml").data
    cfg = OmegaConf.merge(
        cfg,
        OmegaConf.load(CONFIG_DIR / "data" / "synthetic.yaml"),
        {"train_size": 64, "val_size": 64, "batch_size": 16},
    )
    full = build_datasets(cfg, seed=0)
    limited = limit_steps(full, steps_per_epoch=6, validation_steps=2)  # 6 > the 4 batches of an epoch
    assert limited.steps_per_epoch == 6 and limited.examples_per_epoch == 96
    assert sum(1 for _ in limited.train) == 6 and sum(1 for _ in limited.validation) == 2
    assert (full.steps_per_epoch, full.examples_per_epoch) == (4, 64)  # the original is left alone
    assert limit_steps(full, None, None).train is full.train
    assert isinstance(limited.train, tf.data.Dataset)


def test_a_missing_launcher_plugin_or_optuna_names_the_extra_to_install(monkeypatch):
    import importlib.util

    from hydra.errors import MissingConfigException

    from tfhydra.cli import preflight
    from tfhydra.config import composition
    from tfhydra.config.errors import ConfigError

    def compose(**kwargs):  # what Hydra raises for hydra/launcher=joblib without the plugin
        raise MissingConfigException("missing", missing_cfg_file="hydra/launcher/joblib", options=["basic"])

    with pytest.raises(ConfigError) as error:
        composition.compose_choices(compose, "config", ["hydra/launcher=joblib"], [])
    assert str(error.value) == (
        "hydra/launcher=joblib: no such hydra/launcher option; accepted: one of basic, "
        "or joblib after pip install -e '.[sweeps]'"
    )

    def compose(**kwargs):  # hydra/launcher=submitit_slurm without any launcher plugin
        raise MissingConfigException("missing", missing_cfg_file="hydra/launcher/submitit_slurm", options=["basic"])

    with pytest.raises(ConfigError) as error:
        composition.compose_choices(compose, "config", ["hydra/launcher=submitit_slurm"], [])
    assert str(error.value) == (
        "hydra/launcher=submitit_slurm: no such hydra/launcher option; accepted: one of basic, "
        "or submitit_slurm after pip install -e '.[slurm]'"
    )
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "optuna" else find_spec(name, *a))
    with pytest.raises(ConfigError, match=r"hydra/sweeper=tfhydra_optuna: Optuna is not installed; accepted: pip "):
        preflight.check_overrides(CONFIG_DIR, "config", ["hparams_search=optuna"], multirun=True)


def test_jobs_killed_at_any_point_are_listed_as_interrupted_with_their_grid_overrides(hand_made_sweep):
    """SIGKILL leaves whatever the job had got to: a bare directory (Hydra had not written .hydra/ yet),
    or a record still saying `running`; both were interrupted, and the summary never counts them as done."""
    from tfhydra.sweep.summary import summarize

    (hand_made_sweep / "4_optimizer.lr=5").mkdir()  # job 4: only its directory
    running = hand_made_sweep / "3_optimizer.lr=4"
    (running / "metrics.json").write_text(json.dumps({"status": "running", "overrides": ["optimizer.lr=4"]}))
    summary = summarize(hand_made_sweep)
    rows = list(csv.DictReader((hand_made_sweep / "summary.csv").open()))
    assert [(r["job"], r["status"], r["directory"]) for r in rows[2:]] == [
        ("2", "diverged", "2_optimizer.lr=3"),
        ("3", "interrupted", "3_optimizer.lr=4"),
        ("4", "interrupted", "4_optimizer.lr=5"),
    ]
    assert rows[4]["overrides"] == "optimizer.lr=5" and rows[4]["epochs"] == "0"
    assert len(summary.jobs) == 5 and summary.counts() == "2 completed, 1 diverged, 2 interrupted"
    assert (
        "| [4_optimizer.lr=5](<4_optimizer.lr=5/>) | `optimizer.lr=5` | interrupted |"
        in (hand_made_sweep / "summary.md").read_text()
    )
    assert not list(hand_made_sweep.glob(".*.partial"))


def seeded_sweep(tmp_path, task=("trainer.seed=1,2,3", "optimizer.lr=1,2")):
    """Six jobs: trainer.seed=1,2,3 x optimizer.lr=1,2, val_loss best values chosen by hand."""
    sweep = tmp_path / "seeds"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "trainer": {"monitor": "val_loss", "monitor_mode": "min"},
                "hydra": {
                    "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None},
                    "overrides": {"task": list(task)},
                },
            }
        )
    )
    best = {(1, 1): 0.5, (1, 2): 0.3, (2, 1): 0.6, (2, 2): 0.2, (3, 1): 0.7, (3, 2): 0.4}
    num = 0
    for seed in (1, 2, 3):
        for lr in (1, 2):
            overrides = [f"trainer.seed={seed}", f"optimizer.lr={lr}"]
            write_job(
                sweep,
                num,
                ",".join(overrides),
                overrides,
                "completed",
                [0.9, best[seed, lr]],
                1.0,
                test=best[seed, lr] + 0.1 * seed,
            )
            num += 1
    return sweep


def test_jobs_that_differ_only_by_seed_are_ranked_as_groups(tmp_path):
    from tfhydra.sweep.summary import summarize

    summary = summarize(seeded_sweep(tmp_path))
    assert [(g.label, g.n, round(g.mean, 6), round(g.std, 6)) for g in summary.groups] == [
        ("optimizer.lr=2", 3, 0.3, 0.1),
        ("optimizer.lr=1", 3, 0.6, 0.1),
    ]
    # test losses: best + 0.1 * seed, so lr=2: 0.4, 0.4, 0.7 (mean 0.5, std 0.1732); lr=1: 0.6, 0.8, 1.0 (0.8, 0.2)
    assert [(round(g.test_mean, 4), round(g.test_std, 4)) for g in summary.groups] == [(0.5, 0.1732), (0.8, 0.2)]
    markdown = (tmp_path / "seeds" / "summary.md").read_text()
    assert "| 1 | `optimizer.lr=2` | 0.3 | 0.1 | 0.5 ± 0.1732 | 3 |" in markdown
    assert "| 2 | `optimizer.lr=1` | 0.6 | 0.1 | 0.8 ± 0.2 | 3 |" in markdown
    assert "Chosen on validation (`val_loss`)" in markdown and "not used to choose" in markdown
    assert "before the test split" not in markdown  # every record has its test block
    rows = list(csv.DictReader((tmp_path / "seeds" / "summary.csv").open()))
    assert len(rows) == 6  # every job is still listed
    assert [(r["group_rank"], r["group_n"], r["group_overrides"]) for r in rows[:3]] == [
        ("1", "3", "optimizer.lr=2")
    ] * 3
    assert float(rows[0]["group_mean_val_loss"]) == pytest.approx(0.3) and float(
        rows[0]["group_std_val_loss"]
    ) == pytest.approx(0.1)
    assert float(rows[0]["group_mean_test_loss"]) == pytest.approx(0.5) and float(
        rows[0]["test_loss"]
    ) == pytest.approx(0.4)
    assert (tmp_path / "seeds" / "summary.png").stat().st_size > 0


def test_the_summary_ranks_only_the_jobs_of_the_recorded_command(tmp_path):
    """An earlier command's job directory left in the sweep directory is not one of this sweep's jobs."""
    from tfhydra.sweep.summary import summarize

    sweep = seeded_sweep(tmp_path)
    write_job(sweep, 1, "optimizer.lr=9", ["optimizer.lr=9"], "completed", [0.01], 1.0)  # an older command's job 1
    write_job(sweep, 7, "optimizer.lr=8", ["optimizer.lr=8"], "completed", [0.01], 1.0)
    summary = summarize(sweep)
    assert sorted(j.name for j in summary.jobs) == sorted(
        d.name for d in sweep.iterdir() if d.is_dir() and "lr=9" not in d.name and "lr=8" not in d.name
    )
    assert summary.best.name != "1_optimizer.lr=9" and len(summary.jobs) == 6


@pytest.mark.parametrize(
    "launcher, expected",
    [
        (["hydra/launcher=submitit_local", "hydra.launcher.cpus_per_task=1"], 1),
        (["hydra/launcher=submitit_slurm", "hydra.launcher.cpus_per_task=3"], 3),
        (["hydra/launcher=submitit_slurm"], 0),  # no cpus_per_task: SLURM's default, and TensorFlow decides
        (["hydra/launcher=ray"], 1),  # Ray reserves one CPU for a task unless told otherwise
        (["hydra/launcher=ray", "+hydra.launcher.ray.remote.num_cpus=4"], 4),
    ],
)
def test_threads_follow_the_cpus_a_cluster_launcher_reserves_per_job(as_hydra_job, launcher, expected):
    """submitit's launchers (local mode and SLURM) give each job `cpus_per_task` CPUs, Ray's gives each task
    `ray.remote.num_cpus`: that many threads."""
    from tfhydra.sweep.kind import auto_threads

    as_hydra_job(hydra_job_config(launcher))
    assert auto_threads() == expected


def test_the_summary_says_why_each_job_stopped_and_when_it_reached_its_target(hand_made_sweep):
    """`stop_reason` and `time_to_target_seconds` of each record (trainer.max_minutes, trainer.stop_at, patience):
    two columns of summary.csv, and beside the epochs in summary.md when a job ended before its epochs ran out."""
    from tfhydra.sweep.summary import summarize

    stops = {0: ("target", 12.345), 1: ("time", None), 2: ("patience", None), 3: ("epochs", None)}
    for job in hand_made_sweep.iterdir():
        num = int(job.name.split("_")[0]) if job.is_dir() and job.name[0].isdigit() else None
        if num in stops and (job / "metrics.json").is_file():
            record = json.loads((job / "metrics.json").read_text())
            record.update(stop_reason=stops[num][0], time_to_target_seconds=stops[num][1])
            (job / "metrics.json").write_text(json.dumps(record))
    summarize(hand_made_sweep)
    rows = {r["job"]: r for r in csv.DictReader((hand_made_sweep / "summary.csv").open())}
    said = {n: (rows[str(n)]["stop_reason"], rows[str(n)]["time_to_target_seconds"]) for n in stops}
    # job 3 was killed before its record: nothing to say
    assert said == {0: ("target", "12.35"), 1: ("time", ""), 2: ("patience", ""), 3: ("", "")}
    markdown = (hand_made_sweep / "summary.md").read_text()
    assert "| 3 (target) |" in markdown and "| 3 (time) |" in markdown, markdown
    assert "| 1 (patience) |" in markdown and " (epochs) |" not in markdown


def test_the_summary_ranks_on_validation_and_shows_test_beside_it(tmp_path):
    """Test figures that would rank the jobs the other way round change nothing: the choice is validation's."""
    from tfhydra.sweep.summary import summarize

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "trainer": {"monitor": "val_loss", "monitor_mode": "min"},
                "hydra": {
                    "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None},
                    "overrides": {"task": ["optimizer.lr=1,2,3"]},
                },
            }
        )
    )
    for num, (val, test) in enumerate([(0.5, 0.1), (0.3, 0.9), (0.4, 0.2)]):
        write_job(
            sweep, num, f"optimizer.lr={num + 1}", [f"optimizer.lr={num + 1}"], "completed", [0.9, val], 1.0, test=test
        )
    summary = summarize(sweep)
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    assert [(r["rank"], r["job"], r["best_val_loss"], r["test_loss"]) for r in rows] == [
        ("1", "1", "0.3", "0.9"),
        ("2", "2", "0.4", "0.2"),
        ("3", "0", "0.5", "0.1"),
    ]
    assert summary.best.name == "1_optimizer.lr=2" and summary.best.test == pytest.approx(0.9)
    assert "best job: 1_optimizer.lr=2 (val_loss=0.3 at epoch 2; test loss=0.9, not used to choose)" in summary.report()
    markdown = (sweep / "summary.md").read_text()
    assert "| test loss |" in markdown and "| 0.3 | 2 | 0.3 | 0.9 |" in markdown
    assert (
        "Chosen on validation (`val_loss`): the ranking, the best job and any promotion never read the test" in markdown
    )


def test_records_from_before_the_test_split_are_summarised_and_said(hand_made_sweep):
    """Records without a test block (schema_version < 2, here none at all) read as before, with a note."""
    from tfhydra.sweep.summary import summarize

    summary = summarize(hand_made_sweep)
    rows = list(csv.DictReader((hand_made_sweep / "summary.csv").open()))
    assert [(r["rank"], r["test_val_loss" if "test_val_loss" in r else "test_loss"]) for r in rows[:2]] == [
        ("1", ""),
        ("2", ""),
    ]
    markdown = (hand_made_sweep / "summary.md").read_text()
    assert "3 job(s) recorded before the test split (metrics.json schema_version < 2) have no test figure" in markdown
    assert any("before the test split" in note for note in summary.notes)
