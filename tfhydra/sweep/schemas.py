"""The types of the `sweep:` section: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING


@dataclass
class ScreenConfig:
    fraction: float | None = MISSING
    epochs: int | None = MISSING


@dataclass
class SweepConfig:
    """conf/tfhydra.yaml's `sweep:` section."""

    screen: ScreenConfig = MISSING
    promote: int | None = MISSING
    folds: int | None = MISSING
    decide: bool = MISSING
    cluster_timeout: float = MISSING


SCHEMAS: dict[str, type] = {"sweep": SweepConfig}
