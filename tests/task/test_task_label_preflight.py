"""A wrong task found before TensorFlow where the data can say so (issue 55 item 5): the labels of a CSV or an npz
read as a bounded sample without TensorFlow (tfhydra/data/label_sample.py) and asked of the run's task
(tfhydra/task/checks.py), in the run plan. Milliseconds each; the command-line rows (no run directory) are in
tests/contract/test_bad_inputs.py."""

from __future__ import annotations

import csv
import io
import sys

import numpy as np
import pytest
from conftest import HYPOTHESIS_SEED, counts_cases
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from tfhydra.config.contracts import LabelSample
from tfhydra.config.errors import ConfigError
from tfhydra.data import label_sample
from tfhydra.data.label_sample import read_label_sample
from tfhydra.task.checks import check_label_sample


def data_node(**keys):
    base = {"val_fraction": 0.2, "test_fraction": 0.2, "class_names": None, "num_classes": None}
    return OmegaConf.create({**base, **keys})


def csv_node(path, label="label", **keys):
    return data_node(name="csv", path=str(path), label=label, delimiter=",", **keys)


def write_table(path, labels, header=("x", "label")):
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows([i, label] for i, label in enumerate(labels))
    return path


def task(name, **keys):
    return OmegaConf.create({"name": name, "threshold": 0.5, "standardize": False, "strata_bins": None, **keys})


def check(name, cfg_data, **task_keys):
    sample = read_label_sample(cfg_data)
    assert sample is not None
    check_label_sample(task(name, **task_keys), cfg_data, sample)


@pytest.fixture(autouse=True)
def fresh_reads():
    label_sample._csv_labels.cache_clear()
    label_sample._npz_labels.cache_clear()


# ---- what each task refuses --------------------------------------------------------------------------------------


def test_a_float_target_under_classification_suggests_regression(tmp_path):
    """scikit-learn's diabetes target as a CSV writes it: 151.0, 75.0, ... (integers, most seen once or twice)."""
    path = write_table(tmp_path / "t.csv", [f"{25.0 + 3 * i}" for i in range(40)] + ["25.0"])
    with pytest.raises(ConfigError) as refused:
        check("classification", csv_node(path))
    line = str(refused.value)
    assert line.startswith(f"{path} (label column): the labels are integers with 40 distinct values in 41 examples")
    assert "more distinct values than half the 24 training rows" in line and "use task=regression" in line
    assert "\n" not in line
    check("regression", csv_node(path))  # the task that takes it
    check("classification", csv_node(path, num_classes=200))  # the user says they are classes: the job decides


def test_non_integer_numbers_under_classification_are_refused(tmp_path):
    path = write_table(tmp_path / "t.csv", ["0.5", "1.5"] * 10)
    with pytest.raises(ConfigError, match=r"non-integer values .*use task=regression for a numeric target"):
        check("classification", csv_node(path))


def test_class_names_and_few_integers_fit_classification(tmp_path):
    check("classification", csv_node(write_table(tmp_path / "a.csv", ["cat", "dog", "bird"] * 8)))
    check("classification", csv_node(write_table(tmp_path / "b.csv", [str(i % 4) for i in range(24)])))
    check("classification", csv_node(write_table(tmp_path / "c.csv", ["0.0", "1.0"] * 12)))  # floats, as pandas writes


def test_class_names_under_regression_are_refused(tmp_path):
    path = write_table(tmp_path / "t.csv", ["low", "high"] * 10)
    with pytest.raises(ConfigError, match=r"\(label column\): the labels are class names .*task=regression takes"):
        check("regression", csv_node(path))


def test_binary_and_multilabel_refuse_numbers_they_cannot_take(tmp_path):
    path = write_table(tmp_path / "t.csv", ["0", "1", "2"] * 8)
    with pytest.raises(ConfigError, match="task=binary takes 0/1 labels"):
        check("binary", csv_node(path))
    check("binary", csv_node(write_table(tmp_path / "b.csv", ["0", "1"] * 8)))
    check("binary", csv_node(write_table(tmp_path / "n.csv", ["neg"] * 8)))  # one name in the rows read: the job's
    with pytest.raises(ConfigError, match="task=multilabel takes multi-hot rows"):
        check("multilabel", csv_node(path))


def test_a_users_own_task_and_other_sources_are_left_to_the_job(tmp_path):
    path = write_table(tmp_path / "t.csv", ["low", "high"] * 10)
    sample = read_label_sample(csv_node(path))
    check_label_sample(OmegaConf.create({"_target_": "user_code.MyTask", "name": "regression"}), csv_node(path), sample)
    assert read_label_sample(data_node(name="digits")) is None
    assert read_label_sample(data_node(name="csv", path=None, label="label", delimiter=",")) is None
    assert read_label_sample(data_node(name="csv", _target_="x.y", path=str(path), label="label")) is None


def test_what_the_sample_cannot_decide_is_left_to_the_job(tmp_path):
    path = write_table(tmp_path / "t.csv", ["1", "2"])
    assert read_label_sample(csv_node(path, label="species")) is None  # no such column: the job lists them
    (tmp_path / "bin.csv").write_bytes(bytes(range(256)))
    assert read_label_sample(csv_node(tmp_path / "bin.csv")) is None  # not UTF-8
    assert read_label_sample(csv_node(tmp_path)) is None  # a folder
    (tmp_path / "empty.csv").write_text("x,label\n1,\n2, \n")
    assert read_label_sample(csv_node(tmp_path / "empty.csv")) is None  # empty cells only: the job names the line


# ---- bounded reads -----------------------------------------------------------------------------------------------


def test_a_large_csv_is_read_up_to_the_cap_only(tmp_path, monkeypatch):
    monkeypatch.setattr(label_sample, "MAX_BYTES", 200)
    path = write_table(tmp_path / "t.csv", [str(i % 3) for i in range(1000)])
    sample = read_label_sample(csv_node(path))
    assert not sample.whole and 10 < len(sample.values) < 60
    assert list(sample.values) == [str(i % 3) for i in range(len(sample.values))]
    assert sample.train_rows == int(len(sample.values) * 0.6)


def test_several_label_columns_are_read_as_rows(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("x,a,b\n1,0,1\n2,1,1\n3,0,0\n")
    sample = read_label_sample(csv_node(path, label=["a", "b"]))
    assert sample.values.tolist() == [["0", "1"], ["1", "1"], ["0", "0"]] and sample.columns == ("a", "b")
    with pytest.raises(ConfigError, match="2 label columns"):
        check_label_sample(task("classification"), csv_node(path, label=["a", "b"]), sample)
    check_label_sample(task("multilabel"), csv_node(path, label=["a", "b"]), sample)


def npz_node(path, **keys):
    base = {"name": "npz", "path": str(path), "y_train": "y_train", "x_val": None, "x_test": "x_test"}
    return data_node(**{**base, **keys})


def test_an_npzs_labels_are_read_from_their_array_alone(tmp_path, monkeypatch):
    y = np.arange(500) % 7
    np.savez(tmp_path / "d.npz", x_train=np.zeros((500, 3)), y_train=y, x_test=np.zeros((2, 3)), y_test=y[:2])
    sample = read_label_sample(npz_node(tmp_path / "d.npz"))
    assert sample.whole and np.array_equal(sample.values, y) and sample.where == f"{tmp_path / 'd.npz'}[y_train]"
    assert sample.train_rows == 400  # the test split ships: validation is 0.2 of the training arrays
    monkeypatch.setattr(label_sample, "MAX_BYTES", 80)  # ten int64 labels
    label_sample._npz_labels.cache_clear()
    sample = read_label_sample(npz_node(tmp_path / "d.npz"))
    assert not sample.whole and np.array_equal(sample.values, y[:10])
    rows = np.asfortranarray(np.tril(np.ones((3, 3))))  # column-major, read whole: the same rows
    np.savez_compressed(tmp_path / "c.npz", x_train=np.zeros((3, 1)), y_train=rows)
    assert np.array_equal(read_label_sample(npz_node(tmp_path / "c.npz", x_test=None)).values, rows)
    np.savez_compressed(tmp_path / "f.npz", x_train=np.zeros((20, 1)), y_train=np.asfortranarray(np.eye(20)))
    assert read_label_sample(npz_node(tmp_path / "f.npz", x_test=None)) is None  # column-major, cut: not its rows


def test_a_float_target_in_an_npz_under_classification(tmp_path):
    y = np.linspace(10, 300, 100)
    np.savez(tmp_path / "d.npz", x_train=np.zeros((100, 3)), y_train=y, x_test=np.zeros((2, 3)), y_test=y[:2])
    with pytest.raises(ConfigError, match=r"d.npz\[y_train\]: the labels are numbers .*use task=regression"):
        check("classification", npz_node(tmp_path / "d.npz"))
    check("regression", npz_node(tmp_path / "d.npz"))


def test_an_npz_array_of_python_objects_is_refused_without_loading_it(tmp_path):
    labels = np.array([1, "a", None], dtype=object)
    np.savez(tmp_path / "d.npz", x_train=np.zeros((3, 2)), y_train=labels, x_test=np.zeros((1, 2)), y_test=[1])
    with pytest.raises(ConfigError, match=r"d.npz\[y_train\]: the array holds Python objects"):
        read_label_sample(npz_node(tmp_path / "d.npz"))


def test_no_tensorflow_is_imported_to_read_and_check_labels(tmp_path):
    import subprocess

    path = write_table(tmp_path / "t.csv", ["low", "high"] * 10)
    code = (
        "import sys\n"
        "from omegaconf import OmegaConf\n"
        "from tfhydra.runner.plan import check_labels_fit_task\n"
        f"cfg = OmegaConf.create({{'data': {dict(csv_node(path))!r}, 'task': {dict(task('classification'))!r}}})\n"
        "check_labels_fit_task(cfg)\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# ---- properties --------------------------------------------------------------------------------------------------

CELL = st.text(st.characters(codec="utf-8", exclude_characters="\x00\r"), max_size=6)


@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    rows=st.lists(st.tuples(CELL, CELL), min_size=1, max_size=60),
    cap=st.integers(min_value=8, max_value=400),
)
def test_a_capped_read_is_the_first_rows_of_the_file(tmp_path_factory, rows, cap):
    """Whatever the cells (commas, quotes, line breaks inside quotes, any UTF-8), the bounded read holds the label
    cells of a prefix of the file's rows, as reading the whole file gives them, or is None (nothing it can say)."""
    folder = tmp_path_factory.mktemp("cap")
    path = folder / "t.csv"
    with open(path, "w", newline="", encoding="utf-8") as file:
        csv.writer(file).writerows([("x", "label"), *rows])
    whole = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))[1:]
    expected = [row[1] for row in whole if len(row) == 2 and row[1].strip()]
    old = label_sample.MAX_BYTES
    label_sample.MAX_BYTES = cap
    try:
        label_sample._csv_labels.cache_clear()
        sample = read_label_sample(csv_node(path))
    finally:
        label_sample.MAX_BYTES = old
        label_sample._csv_labels.cache_clear()
    if sample is not None:
        read = list(sample.values)
        assert read == expected[: len(read)] and (not sample.whole or read == expected)


LABELS = st.one_of(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False).filter(lambda v: v % 1 != 0), min_size=2, max_size=40),
    st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=2, max_size=40),
)


@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(labels=LABELS, whole=st.booleans())
def test_numbers_and_names_each_fit_one_of_the_two_tasks(labels, whole):
    """Non-integer numbers are refused under classification and taken under regression; class names the other way
    round; each refusal one line naming the other task, whether the rows read are the whole file or its start."""
    values = np.array([repr(v) if isinstance(v, float) else v for v in labels])
    sample = LabelSample(values, "t.csv (label column)", ("label",), whole, max(1, len(values) * 3 // 5))
    numbers = isinstance(labels[0], float)
    refused, taken = ("classification", "regression") if numbers else ("regression", "classification")
    with pytest.raises(ConfigError) as error:
        check_label_sample(task(refused), data_node(), sample)
    line = str(error.value)
    assert "\n" not in line and line.startswith("t.csv (label column): ")
    assert ("use task=regression" in line) if numbers else ("task=regression takes numbers" in line)
    check_label_sample(task(taken), data_node(), sample)


@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(classes=st.integers(2, 30), per_class=st.integers(2, 20), seed_=st.integers(0, 2**16))
def test_classes_with_two_training_rows_each_are_never_refused(classes, per_class, seed_):
    """Integer classes each seen at least twice in the training rows they give are not a numeric target, in any
    order and whether or not the rows read are the whole file."""
    rng = np.random.default_rng(seed_)
    labels = rng.permutation(np.repeat(np.arange(classes), per_class)).astype(str)
    rows = len(labels)
    for whole in (True, False):
        sample = LabelSample(labels, "t.csv (label column)", ("label",), whole, max(2 * classes, rows * 3 // 5))
        check_label_sample(task("classification"), data_node(), sample)
