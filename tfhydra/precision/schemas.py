"""The types of the precision options (no TensorFlow): each option is a policy's name and nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING


@dataclass
class PrecisionConfig:
    name: str = MISSING


SCHEMAS: dict[str, type] = {f"precision/{name}": PrecisionConfig for name in ("fp32", "mixed", "bf16")}
