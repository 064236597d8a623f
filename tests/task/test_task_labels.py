"""Each task reads the labels it takes and refuses the others in one line naming the kind found and the task that
takes them; its predict rows and its record read back. No training: milliseconds each."""

import numpy as np
import pytest
from omegaconf import OmegaConf

from tfhydra.config.contracts import DataSpec
from tfhydra.config.errors import ConfigError
from tfhydra.data.source import class_labels
from tfhydra.task.build import build_task, task_of_record

NO_CLASSES = OmegaConf.create({"class_names": None, "num_classes": None})


def task(name: str, **keys):
    return build_task(OmegaConf.create({"name": name, **keys}))


def read(name: str, values, columns=(), **keys):
    return task(name, **keys).read_labels(np.asarray(values), "data.label", NO_CLASSES, None, columns, class_labels)


def refusal(name: str, values, columns=()) -> str:
    with pytest.raises(ConfigError) as caught:
        read(name, values, columns)
    line = str(caught.value)
    assert "\n" not in line and len(line) < 300, line  # one line, never the list of values
    return line


def test_a_numeric_target_given_to_classification_says_to_use_regression():
    prices = [f"{v:.2f}" for v in np.linspace(10, 99, 500)]  # CSV cells: strings that are numbers
    line = refusal("classification", prices)
    assert line.startswith("data.label: the labels are numbers (500 distinct non-integer values in 500 examples)")
    assert "use task=regression" in line and "10.00" not in line


def test_many_integer_values_seen_once_are_a_numeric_target_but_a_hundred_classes_are_classes():
    line = refusal("classification", np.arange(500))
    assert "integers with 500 distinct values in 500 examples" in line and "use task=regression" in line
    labels, names = read("classification", np.repeat(np.arange(100), 3))  # CIFAR-100-like: every class seen 3 times
    assert labels.dtype == np.int64 and len(names) == 100


def test_multi_hot_rows_given_to_classification_say_to_use_multilabel():
    line = refusal("classification", [[1, 0, 1], [0, 1, 1], [1, 0, 0]])
    assert "multi-hot rows of 3 labels" in line and "task=multilabel" in line


def test_one_hot_rows_stay_classes():
    labels, names = read("classification", np.eye(3)[[0, 2, 1, 2]])
    assert labels.tolist() == [0, 2, 1, 2] and names == ("0", "1", "2")


def test_class_strings_given_to_regression_say_to_use_classification():
    line = refusal("regression", ["cat", "dog", "cat"])
    assert 'class names (2 distinct, e.g. "cat")' in line and "task=classification" in line


def test_regression_reads_one_or_several_targets_as_float32_rows():
    labels, names = read("regression", ["1.5", "2.25", "-3"])
    assert labels.dtype == np.float32 and labels.shape == (3, 1) and labels[:, 0].tolist() == [1.5, 2.25, -3.0]
    assert names == ("target",)
    labels, names = read("regression", np.array([["1", "2"], ["3", "4"]]), columns=("a", "b"))
    assert labels.tolist() == [[1.0, 2.0], [3.0, 4.0]] and names == ("a", "b")


def test_binary_reads_0_1_and_two_names_and_refuses_three_classes():
    labels, names = read("binary", [0, 1, 1, 0])
    assert labels.shape == (4, 1) and labels[:, 0].tolist() == [0, 1, 1, 0] and names == ("0", "1")
    labels, names = read("binary", ["spam", "ham", "spam"])
    assert labels[:, 0].tolist() == [1, 0, 1] and names == ("ham", "spam")  # sorted: the second is positive
    line = refusal("binary", [0, 1, 2, 1])
    assert "integers with 3 distinct values" in line and "task=classification takes more classes" in line


def test_multilabel_takes_multi_hot_rows_and_refuses_one_label_per_example():
    labels, names = read("multilabel", [[1, 0, 1], [0, 1, 1]], columns=("red", "green", "blue"))
    assert labels.dtype == np.float32 and names == ("red", "green", "blue")
    assert "task=classification or task=binary" in refusal("multilabel", [0, 1, 2])


def test_regression_standardize_fits_the_training_labels_only():
    spec = DataSpec((4,), 1, ("target",), 4, 2)
    head = task("regression", standardize=True).head(spec, np.array([[1.0], [3.0], [5.0], [7.0]]))
    assert head.units == 1 and head.activation == "linear" and head.offset == (4.0,)
    assert head.scale == pytest.approx((np.std([1, 3, 5, 7]),))
    assert task("regression").head(spec, None).scale is None


def test_only_classification_stratifies_by_class_and_pictures_a_confusion_matrix_regression_a_scatter():
    labels = np.array([0, 1, 1, 0])
    assert task("classification").strata(labels).tolist() == [0, 1, 1, 0]
    assert task("binary").strata(labels.reshape(-1, 1).astype(np.float32)).tolist() == [0, 1, 1, 0]
    assert task("regression").strata(labels) is None and task("multilabel").strata(labels) is None
    spec = DataSpec((4,), 3, ("a", "b", "c"), 4, 2)
    pictures = {n: task(n).head(spec, None).pictures for n in ("classification", "binary", "multilabel", "regression")}
    assert pictures == {"classification": "confusion", "binary": "none", "multilabel": "none", "regression": "scatter"}


def test_prediction_rows_say_what_each_task_predicts():
    binary = task("binary", threshold=0.7)
    assert binary.prediction_rows(np.array([[0.6], [0.9]], np.float32), ("no", "yes"), 1) == [
        (["no", "0.6"], {"class": "no", "probability": 0.6}),
        (["yes", "0.9"], {"class": "yes", "probability": 0.9}),
    ]
    assert binary.predicted_classes(np.array([[0.6], [0.9]])).tolist() == [0, 1]
    multi = task("multilabel", threshold=0.5)
    assert multi.prediction_header(("a", "b"), 1) == ["labels", "probability_a", "probability_b"]
    assert multi.prediction_rows(np.array([[0.75, 0.25]], np.float32), ("a", "b"), 1)[0][0] == ["a", "0.75", "0.25"]
    regression = task("regression")
    assert regression.prediction_header(("price",), 1) == ["predicted_price"]
    assert regression.prediction_rows(np.array([[101.5]], np.float32), ("price",), 1) == [
        (["101.5"], {"predictions": {"price": 101.5}})
    ]
    assert regression.predicted_classes(np.array([[1.0]])) is None


def test_a_record_gives_back_its_task():
    assert task_of_record(None).name == "classification"  # a run recorded before tasks
    binary = task_of_record({"name": "binary", "threshold": 0.25})
    assert binary.name == "binary" and binary.threshold == 0.25
    assert task_of_record({"name": "regression", "standardize": True}).standardize is True
    own = task_of_record({"name": "my_task", "threshold": "not a number"})
    assert own.name == "my_task" and own.threshold == 0.5
    assert own.prediction_header(("y",), 1) == ["y"]


def test_every_head_ends_in_float32_under_mixed_precision():
    import tf_keras as keras

    from tfhydra.config.contracts import Head
    from tfhydra.model.head import task_head

    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        for head in (Head(3), Head(1, "sigmoid"), Head(2, "linear", "predictions", (2.0, 3.0), (10.0, -1.0))):
            model = keras.Sequential(
                [keras.Input((4,)), *task_head(DataSpec((4,), 3, ("a", "b", "c"), 4, 2, head=head))]
            )
            out = model(np.ones((2, 4), np.float32))
            assert out.dtype == "float32" and out.shape == (2, head.units) and model.layers[-1].name == head.output
    finally:
        keras.mixed_precision.set_global_policy("float32")
    standardized = keras.Sequential(
        [
            keras.Input((1,)),
            *task_head(DataSpec((1,), 1, ("y",), 4, 2, head=Head(1, "linear", "predictions", (2.0,), (10.0,)))),
        ]
    )
    standardized.layers[0].set_weights([np.ones((1, 1), np.float32), np.zeros(1, np.float32)])
    assert standardized(np.array([[3.0]], np.float32)).numpy().tolist() == [[16.0]]  # 3 * 2 + 10
