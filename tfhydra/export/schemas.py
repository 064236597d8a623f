"""The types of the `export:` section: dataclass schemas,
stored in Hydra's ConfigStore as `schema/<name>` (tfhydra/runner/plan.py `store_schemas`) and named by each YAML's
defaults list. The values and their comments stay in conf/; ranges and
choices are checked by the rules in this room's checks (docs/design.md, "Typed configs"). No TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from tfhydra.config.typed import Choice


class TfliteQuantization(Choice):
    none = "none"
    dynamic = "dynamic"
    float16 = "float16"
    int8 = "int8"


@dataclass
class TfliteConfig:
    quantization: TfliteQuantization = MISSING
    calibration_samples: int = MISSING
    integer_io: bool = MISSING


@dataclass
class ExportConfig:
    """conf/tfhydra.yaml's `export:` section."""

    formats: list[str] = MISSING
    tflite: TfliteConfig = MISSING


SCHEMAS: dict[str, type] = {"export": ExportConfig}
