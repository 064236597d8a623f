"""The file sources beyond csv and npz read each task's labels: text_csv's label columns (0/1 per label,
numbers, one 0/1 column), tfrecord's float or fixed-length label feature; each kind trains a tiny in-process run
and records the task's metric, and a label that does not fit the task is one line."""

import csv

import numpy as np
import pytest
from conftest import read_run_record

import tfhydra
from tfhydra.config.errors import ConfigError

QUICK = ["logging.histogram_freq=0", "data.batch_size=32", "optimizer.lr=0.02", "export.formats=[]"]
TEXT = ["data=text_csv", "data.sequence_length=8", "model=lstm", "model.units=[8]", "model.embedding_dim=8"]
TOPICS = {"sport": ["goal", "match", "team"], "music": ["song", "band", "album"], "food": ["bread", "soup", "cake"]}


def topics_csv(path, rows: int = 240):
    """Columns text, sport, music, food (0/1: the topics a text's words come from, several per row), score
    (the number of topics, plus noise) and spam (1 when music is one of them)."""
    rng = np.random.default_rng(3)
    y = (rng.uniform(size=(rows, len(TOPICS))) < 0.5).astype(int)
    with open(path, "w", newline="") as file:
        table = csv.writer(file)
        table.writerow(["text", *TOPICS, "score", "spam"])
        for row in y:
            words = ["the", "a", "it"] + [w for k, t in enumerate(TOPICS) if row[k] for w in TOPICS[t][:2]]
            score = 10 * row.sum() + rng.normal(scale=0.5)
            table.writerow([" ".join(rng.permutation(words)), *row, f"{score:.3f}", row[1]])
    return y


def trained(compose_cfg, tmp_path, overrides) -> dict:
    tfhydra.run(compose_cfg([*overrides, *QUICK]), run_dir=tmp_path / "run")
    record = read_run_record(tmp_path / "run")
    assert record["status"] == "completed"
    return record


def test_text_csv_multi_label_columns_train_a_multilabel_task(compose_cfg, tmp_path):
    topics_csv(tmp_path / "t.csv")
    labels = "data.label=[sport,music,food]"
    overrides = [*TEXT, f"data.path={tmp_path / 't.csv'}", labels, "task=multilabel", "trainer.epochs=6"]
    record = trained(compose_cfg, tmp_path, overrides)
    assert record["data"]["head"]["units"] == 3 and record["data"]["head"]["activation"] == "sigmoid"
    assert tuple(record["data"]["class_names"]) == ("sport", "music", "food")
    assert record["test"]["metrics"]["auc"] > 0.8, record["test"]


def test_text_csv_numeric_column_trains_a_regression(compose_cfg, tmp_path):
    topics_csv(tmp_path / "t.csv")
    target = ["data.label=score", "task=regression", "task.standardize=true", "trainer.epochs=6"]
    record = trained(compose_cfg, tmp_path, [*TEXT, f"data.path={tmp_path / 't.csv'}", *target])
    test = record["test"]["metrics"]
    assert record["data"]["head"]["activation"] == "linear" and {"rmse", "mae", "r2"} <= set(test)
    assert test["rmse"] < 10, test  # the target spans 0..30 with a std of about 8.7


def test_text_csv_zero_one_column_trains_a_binary_task(compose_cfg, tmp_path):
    topics_csv(tmp_path / "t.csv")
    overrides = [*TEXT, f"data.path={tmp_path / 't.csv'}", "data.label=spam", "task=binary", "trainer.epochs=6"]
    record = trained(compose_cfg, tmp_path, overrides)
    assert record["data"]["head"]["units"] == 1 and record["test"]["metrics"]["auc"] > 0.8, record["test"]


@pytest.mark.parametrize(
    ("label", "task", "said"),
    [
        ("score", "classification", r"\(score column\): the labels are numbers .*use task=regression"),
        ("[sport,music,food]", "classification", r"3 label columns; .*task=multilabel or task=regression take several"),
        ("text", "regression", r"\(text column\): the labels are class names .*task=regression takes"),
    ],
    ids=["numbers-classification", "multi-hot-classification", "names-regression"],
)
def test_a_text_csv_label_that_does_not_fit_the_task_is_one_line(compose_cfg, tmp_path, label, task, said):
    topics_csv(tmp_path / "t.csv", rows=120)
    cfg = compose_cfg([*TEXT, f"data.path={tmp_path / 't.csv'}", f"data.label={label}", f"task={task}", *QUICK])
    with pytest.raises(ConfigError, match=said) as caught:
        tfhydra.run(cfg, run_dir=tmp_path / "run")
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400
