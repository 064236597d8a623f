"""benchmarks/task_baselines.py compares tfhydra with scikit-learn on the same test rows: the rows it gives the
baselines (and writes as the npz's x_test) are the ones tfhydra's CSV source holds out, for every task's split
(stratified by class, or a seeded shuffle), and --tune's linear reference fits and validates on the rows tfhydra
does. Nothing is trained here; the benchmark itself is the measurement."""

import sys

import numpy as np
import pytest
from conftest import ROOT

from tfhydra.data.pipeline import build_datasets
from tfhydra.task.build import build_task

sys.path.append(str(ROOT / "benchmarks"))  # after tests/: its combinations.py is not the tests' own
import task_baselines  # noqa: E402


@pytest.mark.parametrize(("name", "seed"), [("diabetes", 3), ("wine", 1), ("multilabel", 0)])
def test_the_baselines_test_rows_are_the_ones_tfhydras_csv_source_holds_out(name, seed, tmp_path, compose_cfg):
    (table,) = task_baselines.tables([name])
    csv, npz, test = task_baselines.write_files(table, seed, tmp_path)
    overrides = [f"task={table.task}", *task_baselines.data_overrides(table, "csv", csv, npz)]
    cfg = compose_cfg([*overrides, f"data.split_seed={seed}"])
    datasets = build_datasets(cfg.data, seed, task=build_task(cfg.task))
    assert datasets.spec.test_size == len(test)
    np.testing.assert_allclose(datasets.serving.raw_test[0], table.x[test].astype(np.float32))
    # --tune's linear reference trains and validates on the rows the tables' default share (conf/tables.yaml) gives
    held = task_baselines.held_out(table, seed)
    assert cfg.data.val_fraction == task_baselines.VAL_FRACTION and datasets.spec.val_size == len(held.validation)
    np.testing.assert_allclose(datasets.serving.raw_validation[0], table.x[held.validation].astype(np.float32))
    with np.load(npz) as arrays:  # the npz contender: the same test rows, the others to train and validate on
        np.testing.assert_allclose(arrays["x_test"], table.x[test])
        assert len(arrays["x_train"]) + len(test) == len(table.x)
