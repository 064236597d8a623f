"""The task group as a config group: the default composes to today's trainer keys, a bad option or key is one
line before TensorFlow is imported, and a user's own task trains by `_target_`."""

import pytest
from conftest import CONFIG_DIR, read_run_record

import tfhydra
from tfhydra.cli.preflight import check_overrides
from tfhydra.config.errors import ConfigError


def test_the_default_task_gives_the_trainer_todays_defaults(compose_cfg):
    trainer = compose_cfg([]).trainer
    assert trainer.loss == "sparse_categorical_crossentropy" and list(trainer.metrics) == ["accuracy"]
    assert trainer.monitor == "val_accuracy" and trainer.monitor_mode == "max"
    assert trainer.early_stopping.monitor == "val_accuracy"
    assert compose_cfg(["task=regression", "trainer.loss=huber"]).trainer.loss == "huber"  # the trainer still wins


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (["task=bogus"], "task=bogus: no such task option; accepted: one of binary, classification, multilabel,"),
        (["task=binary", "task.threshold=1.5"], "task.threshold=1.5: out of range; accepted: a number in (0.0, 1.0)"),
        # `yes` is a boolean to the schema (docs/design.md, "Typed configs"): a word that is none is refused
        (["task=regression", "task.standardize=maybe"], "task.standardize=maybe: not an accepted value"),
        (["task.nokey=1"], "task.nokey=1: unknown key; accepted: a key of task: name, loss, metrics"),
        (["task=regression", "trainer.monitor=val_accuracy"], "trainer.monitor=val_accuracy: not a metric this run"),
    ],
)
def test_a_bad_task_option_or_key_is_one_line_before_tensorflow(overrides, line):
    with pytest.raises(ConfigError) as caught:
        check_overrides(CONFIG_DIR, "config", overrides)
    assert str(caught.value).startswith(line) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("task", "loss", "expects"),
    [
        ("regression", "categorical_crossentropy", "one-hot rows"),
        ("regression", "binary_crossentropy", "0/1 labels"),
        ("binary", "sparse_categorical_crossentropy", "class indices"),
        ("multilabel", "SparseCategoricalCrossentropy", "class indices"),
        ("classification", "mse", "numbers"),
        ("classification", "binary_crossentropy", "0/1 labels"),
        ("classification", "categorical_crossentropy", "one-hot rows"),
    ],
)
def test_a_loss_that_expects_other_labels_than_the_task_is_one_line(task, loss, expects):
    with pytest.raises(ConfigError) as caught:
        check_overrides(CONFIG_DIR, "config", [f"task={task}", "data=synthetic", f"trainer.loss={loss}"])
    labels = {"classification": "class indices", "binary": "0/1 labels", "multilabel": "0/1 labels"}.get(
        task, "numbers"
    )
    assert str(caught.value).startswith(
        f"trainer.loss={loss}: it expects {expects}, and task={task} trains on {labels}; accepted: a loss for {labels}"
    )


def test_every_keras_loss_name_says_which_labels_it_expects():
    """A new name in the trainer's list of Keras losses is classified too, or no task would refuse it."""
    from tfhydra.task.checks import LOSS_LABELS
    from tfhydra.trainer.checks import KERAS_LOSSES

    assert set(LOSS_LABELS) == KERAS_LOSSES


@pytest.mark.parametrize(
    ("task", "loss"),
    [
        ("regression", "huber"),
        ("regression", "Poisson"),
        ("binary", "hinge"),
        ("multilabel", "BinaryFocalCrossentropy"),
    ],
)
def test_a_loss_that_fits_the_tasks_labels_passes(task, loss):
    check_overrides(CONFIG_DIR, "config", [f"task={task}", "data=synthetic", f"trainer.loss={loss}"])


def test_every_task_option_passes_the_preflight():
    for name in ("classification", "binary", "multilabel", "regression"):
        check_overrides(CONFIG_DIR, "config", [f"task={name}", "data=synthetic"])


def test_a_users_own_task_trains_by_target(compose_cfg, tmp_path):
    cfg = compose_cfg(
        [
            "~task",
            "+task._target_=user_code.build_count_task",
            "+task.loss=poisson",
            "+task.metrics=[mae]",
            "+task.monitor=val_loss",
            "+task.monitor_mode=min",
            "data=synthetic",
            "data.shape=[8,8,1]",
            "data.num_classes=2",
            "data.train_size=64",
            "data.val_size=32",
            "data.test_size=32",
            "model=mlp",
            "model.units=[8]",
            "trainer.epochs=1",
            "logging.histogram_freq=0",
        ]  # fmt: skip
    )
    tfhydra.run(cfg, run_dir=tmp_path)
    record = read_run_record(tmp_path)
    assert record["status"] == "completed" and record["task"] == {"name": "counts", "threshold": 0.5, "headline": []}
    assert record["data"]["head"] == {
        "units": 2, "activation": "exponential", "output": "rates", "scale": None, "offset": None, "pictures": "none"
    }  # fmt: skip
    assert "mae" in record["test"]["metrics"]
