"""What the run plan checks in the `trainer:` section: mistakes the config alone decides. No TensorFlow."""

from __future__ import annotations

import math

from omegaconf import DictConfig, ListConfig

from tfhydra.config.errors import ConfigError, suggestion
from tfhydra.config.schema import Rule, choice, integer, is_int, is_target, number, optional
from tfhydra.record.monitor import MODES

# The names tf_keras resolves to a loss or a metric it can build with no arguments, so a misspelling is
# refused before TensorFlow is imported (Keras' own `metrics.get` accepts any string and fails at the first
# training step). tests/runner/test_plan_group_checks.py checks both sets against the installed tf_keras.
KERAS_LOSSES = frozenset(
    {
        "BinaryCrossentropy",
        "BinaryFocalCrossentropy",
        "CategoricalCrossentropy",
        "CategoricalFocalCrossentropy",
        "CategoricalHinge",
        "CosineSimilarity",
        "Hinge",
        "Huber",
        "KLD",
        "KLDivergence",
        "LogCosh",
        "MAE",
        "MAPE",
        "MSE",
        "MSLE",
        "MeanAbsoluteError",
        "MeanAbsolutePercentageError",
        "MeanSquaredError",
        "MeanSquaredLogarithmicError",
        "Poisson",
        "SparseCategoricalCrossentropy",
        "SquaredHinge",
        "binary_crossentropy",
        "binary_focal_crossentropy",
        "categorical_crossentropy",
        "categorical_focal_crossentropy",
        "categorical_hinge",
        "cosine_similarity",
        "hinge",
        "huber",
        "kl_divergence",
        "kld",
        "kullback_leibler_divergence",
        "log_cosh",
        "logcosh",
        "mae",
        "mape",
        "mean_absolute_error",
        "mean_absolute_percentage_error",
        "mean_squared_error",
        "mean_squared_logarithmic_error",
        "mse",
        "msle",
        "poisson",
        "sparse_categorical_crossentropy",
        "squared_hinge",
    }
)
KERAS_METRICS = frozenset(
    {
        "AUC",
        "Accuracy",
        "BinaryAccuracy",
        "BinaryCrossentropy",
        "BinaryIoU",
        "CategoricalAccuracy",
        "CategoricalCrossentropy",
        "CategoricalHinge",
        "CosineSimilarity",
        "F1Score",
        "FBetaScore",
        "FalseNegatives",
        "FalsePositives",
        "Hinge",
        "KLD",
        "KLDivergence",
        "LogCoshError",
        "MAE",
        "MAPE",
        "MSE",
        "MSLE",
        "MeanAbsoluteError",
        "MeanAbsolutePercentageError",
        "MeanSquaredError",
        "MeanSquaredLogarithmicError",
        "Poisson",
        "Precision",
        "R2Score",
        "Recall",
        "RootMeanSquaredError",
        "SparseCategoricalAccuracy",
        "SparseCategoricalCrossentropy",
        "SparseTopKCategoricalAccuracy",
        "SquaredHinge",
        "TopKCategoricalAccuracy",
        "TrueNegatives",
        "TruePositives",
        "acc",
        "accuracy",
        "binary_accuracy",
        "binary_crossentropy",
        "binary_focal_crossentropy",
        "categorical_accuracy",
        "categorical_crossentropy",
        "categorical_focal_crossentropy",
        "ce",
        "crossentropy",
        "hinge",
        "kl_divergence",
        "kld",
        "kullback_leibler_divergence",
        "log_cosh",
        "logcosh",
        "mae",
        "mape",
        "mean_absolute_error",
        "mean_absolute_percentage_error",
        "mean_squared_error",
        "mean_squared_logarithmic_error",
        "mse",
        "msle",
        "poisson",
        "sparse_categorical_accuracy",
        "sparse_categorical_crossentropy",
        "sparse_top_k_categorical_accuracy",
        "squared_hinge",
        "top_k_categorical_accuracy",
    }
)


# The seeds every seeded library of a run takes: NumPy's legacy seeding (np.random.seed, which Keras'
# set_random_seed calls, and scikit-learn's random_state in the stratified splits) takes [0, 2**32 - 1];
# Python's random.seed takes any integer, and tf.random.set_seed any int64, so NumPy's range is the one.
SEED_RANGE = (0, 2**32 - 1)


def check_seed(cfg: DictConfig) -> None:
    """`trainer.seed` must be one NumPy accepts, or the run stops in a traceback once TensorFlow is loaded."""
    seed, (low, high) = cfg.trainer.seed, SEED_RANGE
    if isinstance(seed, bool) or not isinstance(seed, int) or not low <= seed <= high:
        raise ConfigError(
            "trainer.seed",
            seed,
            f"an integer in [{low}, {high}] (2**32 - 1: the seeds NumPy, and so Keras' set_random_seed, accept)",
            "out of range",
        )


def metric_names(metrics) -> list[str]:
    """The names Keras logs `trainer.metrics` under: the name given, else a `_target_`'s class name."""
    return [m if isinstance(m, str) else m.get("name", str(m.get("_target_", "")).rsplit(".", 1)[-1]) for m in metrics]


def logged_metrics(cfg_trainer: DictConfig) -> list[str]:
    """The names Keras logs for this trainer: loss, each metric, and their val_ twins."""
    names = ["loss", *metric_names(cfg_trainer.metrics)]
    return names + [f"val_{n}" for n in names]


def check_monitor(cfg: DictConfig) -> None:
    """`trainer.monitor` picks the exported epoch, and early stopping watches its own monitor: both must be logged
    (Keras' EarlyStopping only warns about a metric it never sees, and then never stops)."""
    trainer = cfg.trainer
    accepted = logged_metrics(trainer)
    if trainer.monitor not in accepted:
        raise ConfigError("trainer.monitor", trainer.monitor, accepted, "not a metric this run logs")
    stopping = trainer.get("early_stopping") or DictConfig({})
    if stopping.patience and stopping.monitor not in accepted:
        raise ConfigError(
            "trainer.early_stopping.monitor", stopping.get("monitor"), accepted, "not a metric this run logs"
        )
    for name in trainer.get("stop_at") or {}:  # a target the run never logs would never stop it
        if name not in accepted:
            raise ConfigError(f"trainer.stop_at.{name}", trainer.stop_at[name], accepted, "not a metric this run logs")


SMOOTHABLE_LOSSES = ("sparse_categorical_crossentropy", "categorical_crossentropy")  # trainer.label_smoothing


def check_objectives(cfg: DictConfig) -> None:
    """`trainer.loss` and `trainer.metrics` given by name must be names tf_keras knows."""
    loss = cfg.trainer.loss
    if isinstance(loss, str) and loss not in KERAS_LOSSES:
        raise ConfigError(
            "trainer.loss",
            loss,
            f"a Keras loss name such as sparse_categorical_crossentropy{suggestion(loss, KERAS_LOSSES)}, "
            "or a node with _target_",
            "unknown loss",
        )
    smoothing = cfg.trainer.get("label_smoothing")
    if smoothing and loss not in SMOOTHABLE_LOSSES:
        raise ConfigError(
            "trainer.label_smoothing",
            smoothing,
            f"0 with this trainer.loss (label smoothing applies to {' and '.join(SMOOTHABLE_LOSSES)})",
            "the loss does not take label smoothing",
        )
    for i, metric in enumerate(cfg.trainer.metrics):
        if isinstance(metric, str) and metric not in KERAS_METRICS:
            raise ConfigError(
                f"trainer.metrics[{i}]",
                metric,
                f"a Keras metric name such as accuracy{suggestion(metric, KERAS_METRICS)}, or a node with _target_",
                "unknown metric",
            )


def check_recovery(cfg: DictConfig) -> None:
    """`trainer.recovery` scales the learning rate it restores; ReduceLROnPlateau sets the rate itself."""
    schedule = cfg.optimizer.get("schedule")
    if cfg.trainer.recovery.max_trials and schedule is not None and schedule.get("name") == "reduce_on_plateau":
        raise ConfigError(
            "trainer.recovery.max_trials",
            cfg.trainer.recovery.max_trials,
            "0 with optimizer.schedule=reduce_on_plateau, or another schedule",
            "recovery scales the rate a schedule gives; reduce_on_plateau sets it itself",
        )


def check_finetune(cfg: DictConfig) -> None:
    """`trainer.finetune.head_epochs` (recipe=finetune): the head phase must leave epochs for the base to train."""
    head = cfg.trainer.finetune.head_epochs
    if head >= cfg.trainer.epochs:
        raise ConfigError(
            "trainer.finetune.head_epochs",
            head,
            f"0 (off) or an integer below trainer.epochs ({cfg.trainer.epochs})",
            "no epochs left to fine-tune the base after the head",
        )
    if head and cfg.optimizer.get("lr") is None:
        raise ConfigError(
            "trainer.finetune.head_epochs",
            head,
            "0 (off), or an optimizer with optimizer.lr",
            "the stage after the head trains at optimizer.lr x trainer.finetune.lr_factor; this optimizer has no lr",
        )


def check_keras3(cfg: DictConfig) -> None:
    """What the trainer does not yet do under keras=3 (docs/keras.md, "Not yet"), refused before anything runs."""
    if cfg.keras != 3:
        return
    if cfg.trainer.loop == "fit" and cfg.trainer.save_every != "epoch":
        raise ConfigError(
            "trainer.save_every",
            cfg.trainer.save_every,
            "epoch with keras=3 and trainer.loop=fit, or trainer.loop=custom (which saves and resumes mid-epoch)",
            "Keras 3's fit starts an epoch only at its first step",
        )
    check_keras3_accumulation(cfg)


def check_keras3_accumulation(cfg: DictConfig) -> None:
    """Keras 3 accumulates by its own `gradient_accumulation_steps` (docs/keras.md): one replica only, and its
    moving average moves every batch rather than every update."""
    steps = cfg.trainer.accumulate_steps
    if steps == 1:
        return
    if cfg.strategy.get("name") in ("mirrored", "multi_worker"):
        raise ConfigError(
            "trainer.accumulate_steps",
            steps,
            f"1 with keras=3 and strategy={cfg.strategy.name}, or keras=2",
            "Keras 3's gradient accumulation cannot update over several replicas (keras-team/keras#20582)",
        )
    if cfg.trainer.ema.decay is not None:
        raise ConfigError(
            "trainer.accumulate_steps",
            steps,
            "1 with keras=3 and trainer.ema.decay, or keras=2",
            "Keras 3's accumulating optimizer moves the weights' average every batch, not every update",
        )


def check_val_steps(cfg: DictConfig) -> None:
    """`trainer.val_every_steps` under fit: fit hands its callbacks control between compiled calls only, so a
    validation point must end one (the custom loop ends a call wherever a validation is due)."""
    trainer = cfg.trainer
    every, calls = trainer.get("val_every_steps"), trainer.steps_per_execution
    if every is None or trainer.loop != "fit" or (every * trainer.accumulate_steps) % calls == 0:
        return
    accepted = f"a multiple of {calls // math.gcd(calls, trainer.accumulate_steps)}"
    raise ConfigError(
        "trainer.val_every_steps",
        every,
        f"{accepted} with trainer.loop=fit and trainer.steps_per_execution={calls}, or trainer.loop=custom",
        "fit validates between its compiled calls only",
    )


CHECKS = (check_seed, check_objectives, check_monitor, check_recovery, check_finetune, check_keras3, check_val_steps)


LOOP_NAMES = ("fit", "custom")  # trainer.loop: the loops tfhydra/trainer/ registers (a test holds them equal)

# The trainer section's ranges and choices, read by the schema's checks (tfhydra/config/schema.py).
RULES: dict[str, Rule] = {
    "trainer.epochs": integer(1),
    "trainer.seed": integer(0),
    "trainer.steps_per_execution": integer(1),
    "trainer.accumulate_steps": integer(1),
    "trainer.verbose": integer(0, 2),
    "trainer.loop": choice(*LOOP_NAMES),
    "trainer.jit_compile": choice("auto", True, False),
    "trainer.clip_norm": optional(number(0)),
    "trainer.clip_value": optional(number(0)),
    "trainer.clip_global_norm": optional(number(0)),
    "trainer.save_every": Rule("'epoch' or an integer >= 1 (steps)", lambda v: v == "epoch" or (is_int(v) and v >= 1)),
    "trainer.resume": choice(True, False),
    "trainer.deterministic": choice(True, False),
    "trainer.early_stopping.patience": integer(0),
    "trainer.early_stopping.mode": choice(*MODES),
    "trainer.early_stopping.min_delta": number(0, low_open=False),
    "trainer.monitor_mode": choice(*MODES),
    "trainer.threads": integer(0),
    "trainer.max_loss": Rule("auto, null or a number > 0", lambda v: v in ("auto", None) or number(0).ok(v)),
    "trainer.max_minutes": optional(number(0)),
    "trainer.steps_per_epoch": optional(integer(1)),
    "trainer.validation_steps": optional(integer(1)),
    "trainer.val_every_steps": optional(integer(1)),
    "trainer.run_eagerly": choice(True, False),
    "trainer.check_numerics": choice(True, False),
    "trainer.recovery.max_trials": integer(0),
    "trainer.recovery.lr_factor": number(0, 1),
    "trainer.finetune.head_epochs": integer(0),
    "trainer.finetune.lr_factor": number(0, 1, high_open=False),
    "trainer.ema.decay": optional(number(0, 1)),
    "trainer.label_smoothing": number(0, 1, low_open=False),
    "trainer.loss": Rule("a Keras loss name, or a node with _target_", lambda v: isinstance(v, str) or is_target(v)),
    "trainer.metrics": Rule(
        "a list of Keras metric names or nodes with _target_",
        lambda v: isinstance(v, (list, ListConfig)) and all(isinstance(m, str) or is_target(m) for m in v),
    ),
}
