"""Three splits for every source (issue 34; docs/data.md): training, validation (every choice) and test (measured
once, on the kept weights). The hold-outs are disjoint, sized as documented and fixed across trainer.seed; a
source's own test split is tested on exactly; and the test split reaches nothing that chooses."""

import json

import numpy as np
import pytest
from conftest import read_run_record
from omegaconf import OmegaConf
from shared_runs import DIGITS_MLP, copy_run, trained_run

import tfhydra
from tfhydra.data.splits import hold_out


def data_cfg(**keys):
    return OmegaConf.create({"val_fraction": 0.2, "test_fraction": 0.2, "split_seed": 0, **keys})


def digits_labels():
    from sklearn.datasets import load_digits

    return load_digits().target


def test_a_one_split_source_holds_out_disjoint_validation_and_test_fixed_across_seeds():
    labels = digits_labels()
    held = hold_out(labels, data_cfg(), seed=42)
    assert (len(held.train), len(held.validation), len(held.test)) == (1077, 360, 360)  # docs/data.md
    assert (
        len(np.concatenate([held.train, held.validation, held.test]))
        == len(np.unique(np.concatenate([held.train, held.validation, held.test])))
        == 1797
    )  # disjoint, and every example in one split
    for split in (held.train, held.validation, held.test):  # stratified: every class in every split
        assert set(labels[split]) == set(range(10))
    other_seed = hold_out(labels, data_cfg(), seed=7)  # trainer.seed does not move the split ...
    assert all(np.array_equal(getattr(held, s), getattr(other_seed, s)) for s in ("train", "validation", "test"))
    followed = hold_out(labels, data_cfg(split_seed=None), seed=7)  # ... unless data.split_seed=null says so
    assert not np.array_equal(held.test, followed.test)
    wider = hold_out(labels, data_cfg(val_fraction=0.3), seed=42)  # validation's share never moves test examples
    assert np.array_equal(wider.test, held.test) and len(wider.validation) == 539  # 0.3 / 0.8 of the 1,437 left
    off = hold_out(labels, data_cfg(test_fraction=0.0), seed=42)
    assert (len(off.train), len(off.validation), len(off.test)) == (1437, 360, 0)


def test_a_source_that_ships_its_test_split_holds_validation_out_of_training_only():
    labels = digits_labels()[:1200]
    held = hold_out(labels, data_cfg(), seed=0, ships_test=True)
    assert (len(held.train), len(held.validation), len(held.test)) == (960, 240, 0)
    both = hold_out(labels, data_cfg(), seed=0, ships_validation=True, ships_test=True)
    assert len(both.train) == 1200 and len(both.validation) == len(both.test) == 0


def test_validation_and_test_that_leave_nothing_to_train_on_are_refused_before_the_job(compose_cfg):
    from tfhydra.config.errors import ConfigError
    from tfhydra.runner.plan import plan_run

    with pytest.raises(ConfigError, match="data.test_fraction=0.8: validation and test together leave no"):
        plan_run(compose_cfg(["data.test_fraction=0.8"]))


def marked_npz(path, test_images, test_labels):
    """digits as uint8 8x8 images: the first 1,200 train, `test_images` the test split."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images * 15).astype(np.uint8)  # 0..240: a pixel of 255 never occurs in training data
    np.savez(path, x_train=images[:1200], y_train=digits.target[:1200], x_test=test_images, y_test=test_labels)
    return images, digits.target


@pytest.mark.slow
def test_npz_tests_on_exactly_x_test_and_validates_on_a_share_of_x_train(tmp_path, compose_cfg):
    from tfhydra.data.pipeline import build_datasets

    marker = np.full((100, 8, 8), 255, np.uint8)  # every test image is the marker: all pixels 255
    marker[:, 0, 0] = np.arange(100)  # ... and numbered, so order and identity can be checked
    images, _ = marked_npz(tmp_path / "marked.npz", marker, np.arange(100) % 10)
    cfg = compose_cfg(["data=npz", f"data.path={tmp_path / 'marked.npz'}", "data.shuffle_buffer=0"])
    datasets = build_datasets(cfg.data, cfg.trainer.seed)
    assert (datasets.spec.train_size, datasets.spec.val_size, datasets.spec.test_size) == (960, 240, 100)
    tested = np.concatenate([x.numpy() for x, _ in datasets.test])
    assert np.array_equal(np.round(tested[..., 0] * 255).astype(np.uint8), marker)  # exactly x_test, in order
    trained = np.concatenate([x.numpy() for x, _ in datasets.train])
    validated = np.concatenate([x.numpy() for x, _ in datasets.validation])
    for split in (trained, validated):  # no marker pixel in training or validation
        assert not np.isclose(split, 1.0).any()
    rows = {np.round(x[..., 0] * 255).astype(np.uint8).tobytes() for x in np.concatenate([trained, validated])}
    assert rows == {x.tobytes() for x in images[:1200]}  # validation is held out of x_train: together, all of it
    assert datasets.serving.raw_test[0].shape == (100, 8, 8)


@pytest.mark.slow
def test_the_test_split_changes_nothing_that_chooses(tmp_path):
    """Two runs that differ only in their test split (real digits; then noise with wrong labels) train, validate,
    stop early and choose the same epoch: only the test block differs. Nothing that chooses reads test."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images * 15).astype(np.uint8)
    np.savez(
        tmp_path / "real.npz",
        x_train=images[:1500],
        y_train=digits.target[:1500],
        x_test=images[1500:],
        y_test=digits.target[1500:],
    )
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "noise.npz",
        x_train=images[:1500],
        y_train=digits.target[:1500],
        x_test=rng.integers(0, 256, (297, 8, 8)).astype(np.uint8),
        y_test=(digits.target[1500:] + 1) % 10,
    )
    records = {}
    for name in ("real", "noise"):
        overrides = [
            "data=npz",
            f"data.path={tmp_path / name}.npz",
            "model=mlp",
            "trainer.epochs=4",
            "trainer.deterministic=true",
            "trainer.early_stopping.patience=1",
            "logging.histogram_freq=0",
            "export.formats=[]",
            "trainer.recovery.max_trials=1",
        ]
        tfhydra.run(tfhydra.compose(overrides), run_dir=tmp_path / name)
        records[name] = read_run_record(tmp_path / name)
    real, noise = records["real"], records["noise"]
    for key in ("history", "best", "epochs_run", "exported", "recoveries"):
        assert real[key] == noise[key], key
    assert real["data"]["test_size"] == noise["data"]["test_size"] == 297
    assert real["test"]["metrics"]["accuracy"] > 0.5 > noise["test"]["metrics"]["accuracy"]


@pytest.fixture(scope="session")
def digits_mlp_run(tmp_path_factory):
    """The default job on the bundled digits with the MLP, two epochs (shared with other rooms: read or copy it)."""
    return trained_run(tmp_path_factory, *DIGITS_MLP)


@pytest.mark.slow
def test_the_default_run_records_three_splits_and_evaluate_reproduces_its_test_figures(
    tmp_path, capsys, digits_mlp_run
):
    from tfhydra.evaluate import main

    assert list(DIGITS_MLP) == ["model=mlp", "trainer.epochs=2", "logging.histogram_freq=0"]  # the default split
    run = copy_run(digits_mlp_run, tmp_path / "run")  # evaluate writes into the run; the old record is rewritten
    record = read_run_record(run)
    data, test = record["data"], record["test"]
    assert (data["train_size"], data["val_size"], data["test_size"]) == (1077, 360, 360)
    assert data["train_size"] + data["val_size"] + data["test_size"] == 1797  # digits' examples
    assert test["examples"] == 360 and test["weights"] == {
        "epoch": record["exported"]["epoch"],
        "file": "checkpoints/best.weights.h5",
        "ema": False,
        "compression": "none",
    }
    assert set(test["metrics"]) == {"loss", "accuracy"} and record["schema_version"] == 3  # 3: the record's keras
    assert main(["--json", str(run)]) == 0
    evaluated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert evaluated["split"] == "test" and evaluated["examples"] == 360
    assert evaluated["metrics"]["accuracy"] == pytest.approx(test["metrics"]["accuracy"], abs=1e-6)
    assert evaluated["metrics"]["loss"] == pytest.approx(test["metrics"]["loss"], rel=1e-5)
    assert main(["--json", "--split=train", str(run)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["examples"] == 1077

    # a run without a test split: evaluate says so in one line
    off = tmp_path / "off"
    tfhydra.run(
        tfhydra.compose(
            ["model=mlp", "trainer.epochs=1", "logging.histogram_freq=0", "data.test_fraction=0"]
            + ["trainer.steps_per_epoch=2", "trainer.validation_steps=1"]  # its splits are read, not its weights
        ),
        run_dir=off,
    )
    assert read_run_record(off)["test"] is None and read_run_record(off)["data"]["test_size"] == 0
    assert main([str(off)]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"Error: --split=test: {off} has no test split (data.test_fraction=0); accepted: --split validation "
        "(the run has no test split)"
    )

    # a record written before the test split (schema_version 1, no test block) is read, and said
    old = json.loads((run / "metrics.json").read_text())
    old.pop("test")
    old["schema_version"] = 1
    (run / "metrics.json").write_text(json.dumps(old))
    assert main(["--json", "--split", "validation", str(run)]) == 0
    captured = capsys.readouterr()
    assert "recorded before the test split (metrics.json schema_version 1)" in captured.err
    assert "before the test split" in json.loads(captured.out.strip().splitlines()[-1])["note"]


def test_resuming_a_run_recorded_before_the_test_split_reads_its_record_and_says_why_not(tmp_path):
    """An unfinished run of an older tfhydra (schema_version 1, a config without the split keys) trained on another
    split of the data: its record is read without error, and the refusal says so in its one line."""
    from tfhydra.config.errors import ConfigError
    from tfhydra.record.rundir import RunPaths
    from tfhydra.runner.hydra_files import without_hydra
    from tfhydra.trust.continuation import check_continuable

    job = without_hydra(tfhydra.compose(["model=mlp"]))
    old = OmegaConf.to_container(job)
    del old["data"]["test_fraction"], old["data"]["split_seed"]
    paths = RunPaths(tmp_path)
    paths.config.parent.mkdir(parents=True)
    paths.config.write_text(OmegaConf.to_yaml(OmegaConf.create(old)))
    paths.metrics.write_text(json.dumps({"schema_version": 1, "status": "interrupted", "monitor": "val_accuracy"}))
    with pytest.raises(ConfigError) as refused:
        check_continuable(tmp_path, job, key="run_dir")
    assert (
        "differs in data.split_seed, data.test_fraction (recorded before the test split, metrics.json "
        "schema_version 1: it trained on another split of the data" in str(refused.value)
    )
    paths.config.write_text(OmegaConf.to_yaml(job))  # its config as today's (hand-edited): it continues
    check_continuable(tmp_path, job, key="run_dir")


@pytest.mark.slow
def test_a_three_job_sweep_ranks_on_validation_and_shows_test(tmp_path):
    import csv

    from conftest import run_cli

    sweep = tmp_path / "sweep"
    done = run_cli(
        "-m",
        "optimizer.lr=0.003,0.0003,0.00003",
        "model=mlp",
        "trainer.epochs=2",
        "logging.histogram_freq=0",
        "export.formats=[]",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = list(csv.DictReader((sweep / "summary.csv").open()))
    records = {r["directory"]: read_run_record(sweep / r["directory"]) for r in rows}
    validation = [float(r["best_val_accuracy"]) for r in rows]
    assert [r["rank"] for r in rows] == ["1", "2", "3"] and validation == sorted(validation, reverse=True)
    for row in rows:  # each job's own test figure, beside its validation figure; all tested on the same 360
        record = records[row["directory"]]
        assert float(row["test_accuracy"]) == pytest.approx(record["test"]["metrics"]["accuracy"])
        assert record["test"]["examples"] == 360 and record["data"]["test_size"] == 360
    markdown = (sweep / "summary.md").read_text()
    assert "| test accuracy |" in markdown and "it was not used to choose" in markdown
    best = rows[0]
    assert (
        f"best job: {best['directory']} (val_accuracy={float(best['best_val_accuracy']):.4f} at epoch "
        f"{best['best_epoch']}; test accuracy={float(best['test_accuracy']):.4f}, not used to choose)" in done.stdout
    )


@pytest.mark.slow
def test_optuna_trials_carry_their_test_figures_and_are_told_their_validation_value(tmp_path):
    optuna = pytest.importorskip("optuna")
    from conftest import run_cli

    sweep = tmp_path / "search"
    done = run_cli(
        "-m",
        "hparams_search=optuna_mlp",
        "hydra.sweeper.n_trials=2",
        "trainer.epochs=1",
        "optimizer.lr=tag(log,interval(1e-4,1e-2))",
        "logging.histogram_freq=0",
        "export.formats=[]",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    study = optuna.load_study(study_name="tfhydra_mlp", storage=f"sqlite:///{sweep / 'optuna.db'}")
    records = {d.name: read_run_record(d) for d in sweep.iterdir() if (d / "metrics.json").is_file()}
    assert len(study.trials) == len(records) == 2
    for trial in study.trials:
        record = next(r for r in records.values() if f"+optuna_trial={trial.number}" in r["overrides"])
        assert trial.value == pytest.approx(record["best"]["val_accuracy"])  # the objective: validation
        assert trial.user_attrs["test_accuracy"] == pytest.approx(record["test"]["metrics"]["accuracy"])
