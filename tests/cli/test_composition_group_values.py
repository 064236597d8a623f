"""A group choice Hydra's grammar reads as a number, a boolean or null (issue 35, item 8: `debug=nan` was a
traceback): for every config group and every such value, in a single run and in a sweep, one ConfigError line
naming the group, what Hydra read and the group's options."""

from __future__ import annotations

import pytest
from conftest import CONFIG_DIR, HYPOTHESIS_SEED, counts_cases
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tfhydra.cli.preflight import check_overrides
from tfhydra.config.errors import ConfigError

GROUPS = sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir() and p.name != "hydra") + ["hydra/launcher"]
NOT_NAMES = {
    "nan": "a number",
    "inf": "a number",
    "1": "an integer",
    "-3": "an integer",
    "1e-3": "a number",
    "true": "a boolean",
    "False": "a boolean",
    "null": "null",
}


@counts_cases(at_least=20)  # of 12 groups x 8 values x 2 = 192: fewer than 40 only if the space ran out
@seed(HYPOTHESIS_SEED)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(group=st.sampled_from(GROUPS), text=st.sampled_from(sorted(NOT_NAMES)), multirun=st.booleans())
def test_a_group_choice_that_is_not_a_name_is_one_line(group, text, multirun):
    value = f"{text},{text}" if multirun else text
    with pytest.raises(ConfigError) as refused:
        check_overrides(CONFIG_DIR, "config", [f"{group}={value}"], multirun=multirun)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(
        f"{group}={value}: Hydra reads it as {NOT_NAMES[text]}, not an option name; accepted: an option name: one of "
    ), message
    assert (CONFIG_DIR / group).is_dir() is False or all(p.stem in message for p in (CONFIG_DIR / group).glob("*.yaml"))


def test_a_quoted_name_is_still_an_option():
    with pytest.raises(ConfigError, match="no such debug option"):
        check_overrides(CONFIG_DIR, "config", ["debug='nan'"])
