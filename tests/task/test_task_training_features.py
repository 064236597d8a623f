"""The training features per task (issue 44, item 5): pruning and quantization-aware training of a regression whose
head ends in the fixed standardisation (tfhydra/compression/outputs.py), EMA and divergence recovery under
task=regression, a sweep ranked by the task's monitor mode (val_loss, lowest first) and an Optuna search that
minimizes it. Evaluate and predict per task: tests/task/test_task_downstream.py."""

import csv
import math

import numpy as np
import pytest
from conftest import CONFIG_DIR, read_run_record, run_cli
from shared_runs import copy_run
from test_task_downstream import (
    evaluated,
    keras_outputs,
    measured_split,
    regression,
    rmse_mae,
    shared_regression,
    tflite_only,
    train,
)

from tfhydra.cli.preflight import check_overrides
from tfhydra.config.errors import ConfigError


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["prune", "quantize"])
def test_a_standardised_regression_is_pruned_or_trained_quantization_aware_and_its_tflite_file_measured(
    tmp_path, scheme
):
    """The head's fixed `outputs * std + mean` has no weights and no toolkit rule: kept as it is, the rest wrapped."""
    record = train(
        regression(tmp_path, f"compression={scheme}", "trainer.epochs=6", "export.formats=[saved_model,tflite,keras]"),
        tmp_path / "run",
    )
    assert record["compression"]["scheme"] == scheme and math.isfinite(record["best"]["val_rmse"])
    assert record["data"]["head"]["offset"][0] == pytest.approx(100, abs=1)
    if scheme == "prune":
        assert record["compression"]["sparsity"]["overall"] == pytest.approx(0.5, abs=0.01)
    else:
        assert record["compression"]["artefacts"]["export/tflite/model.tflite"]["quantization"] == "int8"
    x, y, _ = measured_split(tmp_path / "run")
    rmse, mae = rmse_mae(keras_outputs(tmp_path / "run", x), y)
    assert rmse < 0.5 * float(np.std(y))  # learnt, in the target's units (a target near 100, std about 3.6)
    assert evaluated(tmp_path / "run")["metrics"]["rmse"] == pytest.approx(rmse, rel=1e-4)
    lite = evaluated(tflite_only(tmp_path / "run", tmp_path / "lite"))
    assert lite["export"] == "tflite" and math.isfinite(lite["metrics"]["rmse"])
    # float TFLite (pruned): the same numbers; int8 (QAT): within the rounding of its 8-bit activations
    assert lite["metrics"]["rmse"] == pytest.approx(rmse, rel=1e-4 if scheme == "prune" else 0.25)
    assert lite["metrics"]["mae"] == pytest.approx(mae, rel=1e-4 if scheme == "prune" else 0.25)


@pytest.fixture(scope="session")
def regression_run(tmp_path_factory):
    return shared_regression(tmp_path_factory)


@pytest.mark.slow
def test_ema_exports_the_averaged_weights_of_a_regression_in_the_targets_units(regression_run, tmp_path):
    """On the EMA regression test_task_downstream's tests of evaluate and predict also read."""
    shared, record = regression_run
    assert "trainer.ema.decay=0.9" in record["overrides"]
    run = copy_run(shared, tmp_path / "run")  # evaluate writes into it
    assert record["test"]["weights"]["ema"] is True and record["test"]["weights"]["epoch"] == record["best"]["epoch"]
    x, y, _ = measured_split(run)
    rmse, _ = rmse_mae(keras_outputs(run, x), y)
    assert record["test"]["metrics"]["rmse"] == pytest.approx(rmse, rel=1e-4) and rmse < 0.5 * float(np.std(y))
    assert evaluated(run)["metrics"]["rmse"] == pytest.approx(rmse, rel=1e-4)


@pytest.mark.slow
def test_a_regression_that_blows_up_is_recovered_at_a_lower_rate(tmp_path):
    """SGD at lr 50 on mse: the loss passes trainer.max_loss (off by default for a loss without a known scale)."""
    blow_up = ["optimizer=sgd", "optimizer.momentum=0.0", "optimizer.lr=50", "trainer.max_loss=1e3"]
    recover = ["trainer.recovery.max_trials=3", "trainer.recovery.lr_factor=0.001", "trainer.epochs=4"]
    record = train(regression(tmp_path, *blow_up, *recover), tmp_path / "run")
    assert 1 <= len(record["recoveries"]) <= 3 and record["recoveries"][0]["lr"] == pytest.approx(0.05)
    assert all(math.isfinite(e["val_loss"]) for e in record["history"]) and math.isfinite(record["best"]["val_rmse"])
    best = min(record["history"], key=lambda e: e["val_loss"])
    assert record["best"]["val_loss"] == best["val_loss"]  # min: the task's monitor mode


@pytest.mark.slow
def test_a_regression_sweep_ranks_its_jobs_by_the_lowest_val_loss(tmp_path):
    overrides = regression(tmp_path, "trainer.epochs=3", "export.formats=[]")
    result = run_cli("-m", *overrides, "optimizer.lr=0.0001,0.03", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "sweep" / "summary.csv").open()))
    losses = {r["optimizer.lr"]: float(r["best_val_loss"]) for r in rows}
    assert [r["rank"] for r in rows] == ["1", "2"] and losses["0.03"] < losses["0.0001"]  # lr 1e-4 barely moves
    assert [r["optimizer.lr"] for r in rows] == ["0.03", "0.0001"]  # lowest first
    best = read_run_record(tmp_path / "sweep" / rows[0]["directory"])
    assert best["monitor_mode"] == "min" and best["best"]["val_loss"] == pytest.approx(losses["0.03"])
    line = next(line for line in result.stdout.splitlines() if line.startswith("best job: "))
    assert line.startswith(f"best job: {rows[0]['directory']} (val_rmse=") and ", chosen by val_loss=" in line, line


def test_an_optuna_search_minimizes_a_regressions_val_loss_and_maximizes_a_classifications_accuracy():
    from hydra import compose, initialize_config_dir

    for task, direction, monitor in (
        ("regression", "minimize", "val_loss"),
        ("classification", "maximize", "val_accuracy"),
    ):
        overrides = ["hparams_search=optuna_mlp", f"task={task}"]
        assert check_overrides(CONFIG_DIR, "config", overrides, multirun=True).launcher == "tfhydra"
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
        assert (cfg.hydra.sweeper.direction, cfg.trainer.monitor) == (direction, monitor)
    with pytest.raises(ConfigError, match=r"^hydra.sweeper.direction=maximize: .*accepted: minimize, as"):
        check_overrides(
            CONFIG_DIR, "config", ["hparams_search=optuna", "task=regression", "hydra.sweeper.direction=maximize"], True
        )


@pytest.mark.slow
def test_an_optuna_search_of_a_regression_minimizes_val_loss(tmp_path):
    optuna = pytest.importorskip("optuna")
    overrides = regression(tmp_path, "trainer.epochs=2", "export.formats=[]", "logging.write_graph=false")
    search = ["hparams_search=optuna_mlp", "hydra.sweeper.n_trials=2", "hydra.sweeper.pruner=none"]
    result = run_cli("-m", *search, *overrides, "model.units=[16]", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert result.returncode == 0, result.stderr[-3000:]
    study = optuna.load_study(study_name="tfhydra_mlp", storage=f"sqlite:///{tmp_path / 'sweep' / 'optuna.db'}")
    assert study.direction == optuna.study.StudyDirection.MINIMIZE
    values = sorted(t.value for t in study.trials)
    records = [read_run_record(d) for d in (tmp_path / "sweep").iterdir() if (d / "metrics.json").is_file()]
    assert sorted(r["best"]["val_loss"] for r in records) == pytest.approx(values)
    assert study.best_value == pytest.approx(values[0])  # the lower val_loss is the best trial
