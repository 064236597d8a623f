"""What the run plan checks in `data.augment`: the Keras layers' names, RandAugment's operations, and MixUp/CutMix's
mixed one-hot targets against the task, the loss and the metrics (tfhydra/data/augment.py, batch_mixing.py and
randaugment.py build them). No TensorFlow.
"""

from __future__ import annotations

from typing import cast

from omegaconf import DictConfig, ListConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, integer, number

# `data.augment` item names -> the tf_keras preprocessing layer each builds (tfhydra/data/augment.py).
AUGMENTATION_NAMES = ("random_flip", "random_rotation", "random_zoom", "random_translation", "random_contrast")
# randaugment's operations, in the order its draws index them (tfhydra/data/randaugment.py says each one's range)
RANDAUGMENT_OPS = (
    "identity",
    "autocontrast",
    "brightness",
    "contrast",
    "sharpness",
    "posterize",
    "solarize",
    "rotate",
    "shear_x",
    "shear_y",
    "translate_x",
    "translate_y",
)
# The items done in plain TensorFlow on whole batches (batch_mixing.py, randaugment.py): their arguments, each one's
# range and default. mixup and cutmix mix the labels too (LABEL_MIXING).
BATCH_AUGMENTATIONS: dict[str, dict[str, tuple[Rule, float]]] = {
    "mixup": {"alpha": (number(0), 0.2)},
    "cutmix": {"alpha": (number(0), 1.0)},
    "randaugment": {
        "ops": (integer(1, len(RANDAUGMENT_OPS)), 2),
        "magnitude": (number(0, 10, low_open=False, high_open=False), 9),
    },
}
LABEL_MIXING = ("mixup", "cutmix")
# with mixup or cutmix: the losses taken as their categorical twin (tfhydra/trainer/mixed_targets.py), and the
# metrics that read a mixed target as its largest class
TWINNED_LOSSES = ("SparseCategoricalCrossentropy", "CategoricalCrossentropy")
TWIN_KEYS = ("_target_", "from_logits", "label_smoothing", "name")
MIXED_TARGET_METRICS = ("accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy")


def augment_items(items) -> list[dict]:
    """`data.augment`'s items as {name: ..., argument: value} dicts (a bare name is {name: it})."""
    items = cast(list, OmegaConf.to_container(items)) if isinstance(items, ListConfig) else list(items or [])
    return [{"name": item} if isinstance(item, str) else dict(item) for item in items]


def mixes_labels(items) -> bool:
    """`data.augment` lists mixup or cutmix: the training targets are mixed one-hot rows."""
    return any(item["name"] in LABEL_MIXING for item in augment_items(items))


def batch_arguments(i: int, item: dict) -> dict:
    """A batch item's arguments, its defaults filled in; an unknown argument or one out of range is one line."""
    arguments = {key: value for key, value in item.items() if key != "name"}
    known = BATCH_AUGMENTATIONS[item["name"]]
    for key, value in arguments.items():
        if key not in known:
            raise ConfigError(
                f"data.augment[{i}].{key}", value, f"{', '.join(known)} for {item['name']}", "unknown argument"
            )
        rule = known[key][0]
        if not rule.ok(value):
            raise ConfigError(f"data.augment[{i}].{key}", value, rule.accepted, rule.problem(value))
    return {key: arguments.get(key, default) for key, (_, default) in known.items()}


def check_augment(cfg: DictConfig) -> None:
    seen: set[str] = set()
    names = sorted((*AUGMENTATION_NAMES, *BATCH_AUGMENTATIONS))
    for i, item in enumerate(augment_items(cfg.data.get("augment"))):
        name = item.get("name")
        if name not in names:
            raise ConfigError(f"data.augment[{i}].name", name, names, "unknown augmentation layer")
        if name in BATCH_AUGMENTATIONS:
            if name in seen:
                raise ConfigError(
                    f"data.augment[{i}].name", name, "each of mixup, cutmix, randaugment once", "listed twice"
                )
            seen.add(name)
            batch_arguments(i, item)
    if mixes_labels(cfg.data.get("augment")):
        check_mixed_targets(cfg)


def check_mixed_targets(cfg: DictConfig) -> None:
    """mixup and cutmix train on mixed one-hot targets: image classification only, with a crossentropy the trainer
    can take as its categorical twin and metrics that read a mixed row as its largest class."""
    i, name = next(
        (i, item["name"]) for i, item in enumerate(augment_items(cfg.data.augment)) if item["name"] in LABEL_MIXING
    )
    task = cfg.task.get("name")
    if task != "classification" or cfg.task.get("_target_"):
        raise ConfigError(
            f"data.augment[{i}].name",
            name,
            "random_* layers and randaugment for this task (mixup and cutmix: task=classification only)",
            f"{name} mixes class labels, and task={cfg.task.get('_target_') or task} trains on other labels",
        )
    loss = cfg.trainer.loss
    crossentropy = isinstance(loss, DictConfig) and str(loss.get("_target_")).rsplit(".", 1)[-1] in TWINNED_LOSSES
    extra = sorted(set(loss) - set(TWIN_KEYS)) if crossentropy else []
    if not (loss == "sparse_categorical_crossentropy" or crossentropy) or extra:
        raise ConfigError(
            "trainer.loss",
            loss if isinstance(loss, str) else loss.get("_target_"),
            "sparse_categorical_crossentropy, or a _target_ node of Keras' SparseCategoricalCrossentropy or "
            f"CategoricalCrossentropy with {', '.join(TWIN_KEYS[1:])} only (trained as the categorical twin)",
            f"the twin does not take its {', '.join(extra)}"
            if extra
            else f"data.augment's {name} trains on mixed one-hot targets, which this loss does not take",
        )
    for j, metric in enumerate(cfg.trainer.metrics):
        if metric not in MIXED_TARGET_METRICS:
            raise ConfigError(
                f"trainer.metrics[{j}]",
                metric if isinstance(metric, str) else metric.get("_target_"),
                "accuracy (measured against each mixed target's largest class)",
                f"data.augment's {name} trains on mixed one-hot targets, which this metric does not take",
            )
