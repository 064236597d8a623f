"""One short epoch on each file-based source through `python train.py data=...`, as users run it (tfrecord's is
the run test_cache_reads also reads, tests/data_runs.py)."""

import data_files
import pytest
from conftest import read_run_record, run_cli
from data_runs import LEAN, tfrecord_one_epoch


def npz(tmp_path):
    return (
        ["data=npz", f"data.path={data_files.write_npz(tmp_path / 'mnist.npz')}"],
        ("0", "1", "2", "3"),
        51,
    )  # x_test is the test split: validation is 0.2 of x_train


def tfrecord(tmp_path):
    return None, ("0", "1", "2", "3"), 51  # the shared run (data_runs.tfrecord_sources); test: 0.2 of train


def image_folder(tmp_path):
    root = data_files.write_image_folder(tmp_path / "pets", per_class=20, val_per_class=4)
    return (
        ["data=image_folder", f"data.path={root}", "data.image_size=[16,16]"],
        ("cat", "dog", "owl"),
        48,
    )  # test: 0.2 of train/


def csv(tmp_path):
    return (
        ["data=csv", f"data.path={data_files.write_csv(tmp_path / 'iris.csv', n=80)}"],
        ("setosa", "versicolor", "virginica"),
        56,
    )  # one split: 0.2 test, 0.1 validation (a table's data.val_fraction, conf/tables.yaml)


def text_csv(tmp_path):
    path = data_files.write_text_csv(tmp_path / "reviews.csv", n=80)
    return (
        [
            "data=text_csv",
            f"data.path={path}",
            "data.sequence_length=12",
            "model=lstm",
            "model.units=[8]",
            "model.embedding_dim=8",
        ],
        ("neg", "pos"),
        48,
    )


@pytest.mark.slow
@pytest.mark.parametrize("source", [npz, tfrecord, image_folder, csv, text_csv], ids=lambda s: s.__name__)
def test_one_epoch_on_each_file_source(tmp_path, tmp_path_factory, source):
    overrides, class_names, train_size = source(tmp_path)
    if overrides is None:
        run_dir = tfrecord_one_epoch(tmp_path_factory)  # trained as below, and completed
    else:
        run_dir = tmp_path / "run"
        result = run_cli(*LEAN, *overrides, f"hydra.run.dir={run_dir}", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
    metrics = read_run_record(run_dir)
    assert metrics["status"] == "completed" and metrics["epochs_run"] == 1
    assert metrics["data"]["name"] == source.__name__ and tuple(metrics["data"]["class_names"]) == class_names
    assert metrics["data"]["train_size"] == train_size
