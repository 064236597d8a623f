"""What the run plan checks in the `data:` section: mistakes the config alone decides. No TensorFlow.

Whether files exist is checked by the schema (tfhydra/schema.py RULES); what they hold is only known
once a source reads them, in the job.
"""
from __future__ import annotations

from omegaconf import DictConfig, ListConfig, OmegaConf

from tfhydra.errors import ConfigError

# `data.augment` item names -> the tf_keras preprocessing layer each builds (tfhydra/data/augment.py).
AUGMENTATION_NAMES = ("random_flip", "random_rotation", "random_zoom", "random_translation", "random_contrast")


def check_augment(cfg: DictConfig) -> None:
    items = cfg.data.get("augment") or []
    items = OmegaConf.to_container(items) if isinstance(items, ListConfig) else list(items)
    for i, item in enumerate(items):
        name = item if isinstance(item, str) else item.get("name")
        if name not in AUGMENTATION_NAMES:
            raise ConfigError(f"data.augment[{i}].name", name, sorted(AUGMENTATION_NAMES),
                              "unknown augmentation layer")


def check_features(cfg: DictConfig) -> None:
    """`data.features` names each column once: a column listed twice would be fed to the model twice."""
    features = cfg.data.get("features")
    if features:
        seen = set()
        for feature in features:
            if feature in seen:
                raise ConfigError("data.features", list(features), "each column at most once",
                                  f"column {feature!r} is listed twice")
            seen.add(feature)
        label = cfg.data.get("label")
        if label in seen:
            raise ConfigError("data.features", list(features), f"feature columns other than the label ({label})",
                              "the label column is also a feature")


CHECKS = (check_augment, check_features)
