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
# the smallest token model: one block of width 16 (an LSTM of 8 units trains the same labels about three times slower)
TEXT = ["data=text_csv", "data.sequence_length=8", "model=transformer", "model.width=16", "model.heads=2"]
TEXT += ["model.blocks=1", "model.mlp_dim=16"]
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


def quarter_images(rows: int, labels: int, seed: int = 4):
    """8x8x1 uint8 images, label k lighting quarter k by its value in [0, 1]: (images, values (rows, labels))."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(size=(rows, labels))
    images = rng.integers(0, 40, size=(rows, 8, 8, 1)).astype(np.float64)
    for k in range(labels):
        images[:, (k // 2) * 4 : (k // 2) * 4 + 4, (k % 2) * 4 : (k % 2) * 4 + 4, 0] += 200 * values[:, k, None, None]
    return images.astype(np.uint8), values


def tfrecords(folder, labels: np.ndarray, images: np.ndarray) -> str:
    import tensorflow as tf
    from data_files import serialized_examples

    folder.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(folder / "train-00000-of-00001.tfrecord")) as writer:
        for record in serialized_examples(images, labels):
            writer.write(record)
    return str(folder / "train-*.tfrecord")


IMAGES = ["model=mlp", "model.units=[32]", "data.image_size=null"]


def test_tfrecord_multi_hot_label_rows_train_a_multilabel_task(compose_cfg, tmp_path):
    images, values = quarter_images(320, 3)
    multi_hot = (values > 0.5).astype(np.int64)
    pattern = tfrecords(tmp_path / "records", multi_hot, images)
    overrides = ["data=tfrecord", f"data.train={pattern}", "data.label_length=3", "task=multilabel", "trainer.epochs=8"]
    record = trained(compose_cfg, tmp_path, [*IMAGES, *overrides])
    assert record["data"]["head"]["units"] == 3 and record["data"]["head"]["activation"] == "sigmoid"
    assert record["test"]["metrics"]["auc"] > 0.8, record["test"]


def test_tfrecord_float_label_rows_train_a_regression_of_two_targets(compose_cfg, tmp_path):
    images, values = quarter_images(320, 2)
    pattern = tfrecords(tmp_path / "records", values.astype(np.float32), images)
    float_rows = ["data.label_dtype=float32", "data.label_length=2"]
    overrides = ["data=tfrecord", f"data.train={pattern}", *float_rows, "task=regression", "trainer.epochs=8"]
    record = trained(compose_cfg, tmp_path, [*IMAGES, *overrides])
    test = record["test"]["metrics"]
    assert record["data"]["head"]["units"] == 2 and {"rmse", "mae", "r2"} <= set(test)
    assert test["rmse"] < 0.2 and test["r2"] > 0.3, test  # each target uniform in [0, 1): std 0.29


@pytest.mark.parametrize(
    ("stored", "keys", "said"),
    [
        ("floats", ["data.label_dtype=float32", "task=classification"], r"are numbers .*use task=regression"),
        ("multi-hot", ["data.label_length=3", "task=classification"], r"multi-hot rows of 3 labels .*task=multilabel"),
        ("floats", ["task=regression"], r"^data.label_key=label: .*holds a float_list .*data.label_dtype sets it"),
        ("multi-hot", ["data.label_length=2", "task=multilabel"], r"^data.label_key=label: .*holding 2 int64 value"),
    ],
    ids=["floats-classification", "multi-hot-classification", "float-feature-as-int64", "wrong-length"],
)
def test_a_tfrecord_label_that_does_not_fit_is_one_line(compose_cfg, tmp_path, stored, keys, said):
    images, values = quarter_images(48, 3)
    labels = values.astype(np.float32)[:, 0] if stored == "floats" else (values > 0.5).astype(np.int64)
    pattern = tfrecords(tmp_path / "records", labels, images)
    cfg = compose_cfg([*IMAGES, "data=tfrecord", f"data.train={pattern}", *keys, *QUICK])
    with pytest.raises(ConfigError, match=said) as caught:
        tfhydra.run(cfg, run_dir=tmp_path / "run")
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 600  # the path, and TensorFlow's own reason


def tagged_images(root, rows: int = 240, separator: str = " "):
    """root/img/<i>.png, each 8x8 RGB image lighting the quarters of its tags, and root/labels.csv of file,labels
    (the tags `separator`-joined; some rows have none)."""
    import tensorflow as tf

    images, values = quarter_images(rows, 3, seed=5)
    tags = values > 0.5
    (root / "img").mkdir(parents=True)
    with open(root / "labels.csv", "w", newline="") as file:
        table = csv.writer(file)
        table.writerow(["file", "labels"])
        for i, (image, row) in enumerate(zip(images, tags, strict=True)):
            (root / "img" / f"{i:04d}.png").write_bytes(tf.io.encode_png(np.repeat(image, 3, axis=2)).numpy())
            names = [n for n, on in zip(["cat", "dog", "owl"], row, strict=True) if on]
            table.writerow([f"img/{i:04d}.png", separator.join(names)])
    return tags


def test_image_folder_labels_csv_trains_a_multilabel_task(compose_cfg, tmp_path):
    tagged_images(tmp_path / "pets", separator="|")
    folder = ["data=image_folder", f"data.path={tmp_path / 'pets'}", f"data.labels_csv={tmp_path / 'pets/labels.csv'}"]
    record = trained(compose_cfg, tmp_path, [*IMAGES, *folder, "task=multilabel", "trainer.epochs=8"])
    assert tuple(record["data"]["class_names"]) == ("cat", "dog", "owl") and record["data"]["train_size"] == 144
    assert record["data"]["head"]["activation"] == "sigmoid" and record["test"]["metrics"]["auc"] > 0.8, record["test"]


def test_image_folder_two_class_folders_train_a_binary_task(compose_cfg, tmp_path):
    from data_files import write_image_folder

    root = write_image_folder(tmp_path / "pets", classes=("cat", "dog"), per_class=40, size=(8, 8))
    record = trained(compose_cfg, tmp_path, [*IMAGES, "data=image_folder", f"data.path={root}", "task=binary",
                                              "trainer.epochs=4"])  # fmt: skip
    assert record["data"]["head"]["units"] == 1 and tuple(record["data"]["class_names"]) == ("cat", "dog")
    assert record["test"]["metrics"]["auc"] > 0.8, record["test"]


def test_an_image_folder_label_that_does_not_fit_is_one_line(compose_cfg, tmp_path):
    from data_files import write_image_folder

    tagged_images(tmp_path / "tags", rows=40)
    listed = ["data=image_folder", f"data.path={tmp_path / 'tags'}", f"data.labels_csv={tmp_path / 'tags/labels.csv'}"]
    folders = ["data=image_folder", f"data.path={write_image_folder(tmp_path / 'pets', size=(8, 8))}"]
    cases = [
        ([*listed, "task=classification"], r"labels.csv \(labels column\): the labels are multi-hot .*task=multilabel"),
        ([*folders, "task=regression"], r"pets/train \(class folders\): the labels are class names \(3 distinct"),
        ([*folders, "task=multilabel"], r"pets/train \(class folders\): the labels are class names .*multi-hot rows"),
    ]
    for case, (overrides, said) in enumerate(cases):
        with pytest.raises(ConfigError, match=said) as caught:
            tfhydra.run(compose_cfg([*IMAGES, *overrides, *QUICK]), run_dir=tmp_path / f"run{case}")
        assert "\n" not in str(caught.value) and len(str(caught.value)) < 400


@pytest.mark.parametrize("listed", ["../outside.png", "/etc/hostname", "img/../../outside.png"])
def test_a_labels_csv_row_leading_out_of_data_path_is_refused(tmp_path, listed):
    """The CSV names files under data.path; an absolute path or one whose `..` leads out is one line naming the row,
    before any file is opened (the image exists: only its place is wrong)."""
    from omegaconf import OmegaConf

    from tfhydra.data.image_labels import labels_table

    root = tmp_path / "tags"
    (root / "img").mkdir(parents=True)
    (tmp_path / "outside.png").write_bytes(b"")
    (root / "img" / "in.png").write_bytes(b"")
    (root / "labels.csv").write_text(f"file,labels\nimg/in.png,cat\n{listed},dog\n")
    with pytest.raises(ConfigError) as caught:
        labels_table(OmegaConf.create({"labels_csv": str(root / "labels.csv"), "class_names": None}), root)
    assert str(caught.value) == (
        f"{root / 'labels.csv'}:3: {listed!r} leads out of it; accepted: a path relative to data.path={root}, inside it"
    )


USER = ["~data", "+data._target_=user_code.declared_source", "data.batch_size=32", "model=mlp", "model.units=[16]"]


def test_a_target_source_declaring_multi_hot_labels_trains_a_multilabel_task(compose_cfg, tmp_path):
    record = trained(compose_cfg, tmp_path, [*USER, "task=multilabel", "trainer.epochs=8", "trainer.monitor=val_auc"])
    assert tuple(record["data"]["class_names"]) == ("a", "b", "c") and record["data"]["head"]["activation"] == "sigmoid"
    assert record["best"]["val_auc"] > 0.8, record["best"]


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        (["task=regression"], r"^data=user_code.declared_source: its labels are multi-hot .*: task=multilabel$"),
        (["task=multilabel", "+data.label_kind=numbers"], r"its labels are numeric .*accepted: task=regression$"),
        (
            ["task=multilabel", "+data.label_kind=numbers", "+data.declare=multi_hot"],
            r"^data=user_code.declared_source \(its train_labels\): the labels are numbers .*task=multilabel takes",
        ),
    ],
    ids=["multi-hot-regression", "numbers-multilabel", "read-by-the-task"],
)
def test_a_target_source_whose_declared_kind_does_not_fit_is_one_line(compose_cfg, tmp_path, keys, said):
    with pytest.raises(ConfigError, match=said) as caught:
        tfhydra.run(compose_cfg([*USER, *keys, *QUICK]), run_dir=tmp_path / "run")
    assert "\n" not in str(caught.value)
