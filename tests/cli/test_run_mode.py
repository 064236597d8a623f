"""The run mode Hydra reads before a run or sweep (`hydra.mode`) comes from the pre-flight's composition: Hydra's
`get_mode` composes the whole config once more only to read that key (tfhydra/config/hydra_api.py)."""

from __future__ import annotations

import pytest
from conftest import CONFIG_DIR, HYPOTHESIS_SEED, counts_cases
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tfhydra.cli.preflight import check_overrides, checked_command_line
from tfhydra.config.hydra_api import hydra_line, mode_from_preflight


@pytest.mark.parametrize(
    ("overrides", "mode"),
    [([], None), (["hydra.mode=MULTIRUN"], RunMode.MULTIRUN), (["hydra.mode=RUN", "model=mlp"], RunMode.RUN)],
)
def test_the_preflight_reads_the_mode_hydra_would_compose(overrides, mode):
    checked = check_overrides(CONFIG_DIR, "config", overrides)
    assert checked.mode_known and checked.mode == mode == hydras_own_mode(overrides)  # Hydra's own answer, composed


def hydras_own_mode(overrides: list[str]):
    """What Hydra 1.3's `_run_hydra` asks before a run: `get_mode` on a Hydra of tfhydra's config directory."""
    hydra = Hydra.create_main_hydra2(task_name="train", config_search_path=create_config_search_path(str(CONFIG_DIR)))
    try:
        return hydra.get_mode(config_name="config", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.slow  # 8 compositions each way: about 6 s
@counts_cases()
@seed(HYPOTHESIS_SEED)
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    mode=st.sampled_from([[], ["hydra.mode=RUN"], ["hydra.mode=MULTIRUN"]]),
    choices=st.lists(
        st.sampled_from(
            ["model=mlp", "model=cnn", "optimizer=sgd", "optimizer=adamw", "precision=mixed", "debug=fast"]
        ),
        unique_by=lambda o: o.split("=")[0],
        max_size=3,
    ),
)
def test_any_commands_mode_is_the_one_hydra_composes(mode, choices):
    overrides = [*choices, *mode]
    checked = check_overrides(CONFIG_DIR, "config", overrides)
    assert checked.mode_known and checked.mode == hydras_own_mode(overrides), overrides


def test_a_command_that_composes_no_job_leaves_the_mode_to_hydra():
    assert checked_command_line(CONFIG_DIR, argv=["--info"]).mode_known is False


def test_the_block_answers_without_composing_and_gives_hydra_its_own_back():
    original = Hydra.get_mode
    with mode_from_preflight(RunMode.MULTIRUN):
        if hydra_line() < (1, 4):  # 1.4 reads the mode without composing: its own get_mode is kept
            assert Hydra.get_mode(None, config_name="no such config", overrides=["no such=key"]) == RunMode.MULTIRUN
        else:
            assert Hydra.get_mode is original
    assert Hydra.get_mode is original
    with pytest.raises(KeyError), mode_from_preflight(None):
        raise KeyError("a run that fails")
    assert Hydra.get_mode is original
