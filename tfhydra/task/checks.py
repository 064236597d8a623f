"""What the run plan checks in the `task:` section, before TensorFlow is imported: the ranges of its keys, and
whether the labels a source could read without TensorFlow fit the task (`check_label_sample`), and whether a loss
named by `trainer.loss` fits the labels the task trains on (`check_loss`)."""

from __future__ import annotations

from tfhydra.config.contracts import LabelSample
from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, integer, number, optional

RULES: dict[str, Rule] = {
    "task.threshold": number(0.0, 1.0, low_open=True, high_open=True),
    "task.standardize": Rule("true or false", lambda v: isinstance(v, bool)),
    "task.strata_bins": optional(integer(2)),
}


def check_label_sample(cfg_task, cfg_data, sample: LabelSample) -> None:
    """A label that does not fit the run's task is one line before TensorFlow (the task's `check_sample`): asked
    of tfhydra's own tasks only (a user's `_target_` task answers its labels in the job)."""
    from tfhydra.task.build import TASKS, build_task

    if cfg_task.get("_target_") or cfg_task.get("name") not in TASKS.names():
        return
    build_task(cfg_task).check_sample(sample, cfg_data)


def sample_strata(cfg_task, sample: LabelSample):
    """The task's strata of a whole sample's one label column, as the job splits by them (tfhydra/data/splits.py),
    for the pre-flight's k-fold check; None when the task has none or the sample cannot say (read in part, several
    columns, values the task reads only in the job, a user's `_target_` task)."""
    import numpy as np

    from tfhydra.task.build import TASKS, build_task

    values = np.asarray(sample.values)
    if not sample.whole or cfg_task.get("_target_") or cfg_task.get("name") not in TASKS.names():
        return None
    if values.ndim > 2 or (values.ndim == 2 and values.shape[1] != 1):
        return None
    try:
        return build_task(cfg_task).strata(values.reshape(-1))
    except (ValueError, TypeError, ConfigError):  # e.g. binary's class names: the job reads them
        return None


# What each Keras loss name expects as labels (tf_keras' and Keras 3's losses by name), and the labels each of
# tfhydra's tasks trains on (docs/tasks.md): a name expecting other labels trains nothing useful, or fails at the
# first step with a shape error. Names not listed (none today; a `_target_` loss) are the user's to answer for.
LOSS_LABELS: dict[str, str] = {
    **dict.fromkeys(("sparse_categorical_crossentropy", "SparseCategoricalCrossentropy"), "class indices"),
    **dict.fromkeys(
        (
            "categorical_crossentropy",
            "CategoricalCrossentropy",
            "categorical_focal_crossentropy",
            "CategoricalFocalCrossentropy",
            "categorical_hinge",
            "CategoricalHinge",
        ),
        "one-hot rows",
    ),
    **dict.fromkeys(
        (
            "binary_crossentropy",
            "BinaryCrossentropy",
            "binary_focal_crossentropy",
            "BinaryFocalCrossentropy",
            "hinge",
            "Hinge",
            "squared_hinge",
            "SquaredHinge",
        ),
        "0/1 labels",
    ),
    **dict.fromkeys(("kld", "KLD", "kl_divergence", "KLDivergence", "kullback_leibler_divergence"), "distributions"),
    **dict.fromkeys(
        (
            "mse",
            "MSE",
            "mean_squared_error",
            "MeanSquaredError",
            "mae",
            "MAE",
            "mean_absolute_error",
            "MeanAbsoluteError",
            "mape",
            "MAPE",
            "mean_absolute_percentage_error",
            "MeanAbsolutePercentageError",
            "msle",
            "MSLE",
            "mean_squared_logarithmic_error",
            "MeanSquaredLogarithmicError",
            "huber",
            "Huber",
            "log_cosh",
            "logcosh",
            "LogCosh",
            "poisson",
            "Poisson",
            "cosine_similarity",
            "CosineSimilarity",
        ),
        "numbers",
    ),
}
TASK_LABELS = {
    "classification": ("class indices", "sparse_categorical_crossentropy"),
    "binary": ("0/1 labels", "binary_crossentropy, binary_focal_crossentropy, hinge or squared_hinge"),
    "multilabel": ("0/1 labels", "binary_crossentropy, binary_focal_crossentropy, hinge or squared_hinge"),
    "regression": ("numbers", "mse, mae, huber, log_cosh, msle, mape, poisson or cosine_similarity"),
}


def check_loss(cfg) -> None:
    """A loss named by `trainer.loss` that expects other labels than the task trains on (a cross-entropy under
    regression, a sparse categorical loss under binary) is one line before training, naming the losses that fit:
    Keras would train it without a word, or fail at the first step with a shape error."""
    loss, task = cfg.trainer.loss, cfg.task.get("name")
    if not isinstance(loss, str) or cfg.task.get("_target_") or task not in TASK_LABELS:
        return
    labels, fitting = TASK_LABELS[task]
    expects = LOSS_LABELS.get(loss)
    if expects is not None and expects != labels:
        raise ConfigError(
            "trainer.loss",
            loss,
            f"a loss for {labels}: {fitting}, or a node with _target_",
            f"it expects {expects}, and task={task} trains on {labels}",
        )


CHECKS = (check_loss,)
