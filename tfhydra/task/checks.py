"""What the run plan checks in the `task:` section, before TensorFlow is imported: the ranges of its keys."""

from __future__ import annotations

from tfhydra.config.schema import Rule, integer, number, optional

RULES: dict[str, Rule] = {
    "task.threshold": number(0.0, 1.0, low_open=True, high_open=True),
    "task.standardize": Rule("true or false", lambda v: isinstance(v, bool)),
    "task.strata_bins": optional(integer(2)),
}
