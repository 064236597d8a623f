"""The run mode Hydra reads before a run or sweep (`hydra.mode`) comes from the pre-flight's composition: Hydra's
`get_mode` composes the whole config once more only to read that key (tfhydra/config/hydra_api.py)."""

from __future__ import annotations

import pytest
from conftest import CONFIG_DIR
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode

from tfhydra.cli.preflight import check_overrides, checked_command_line
from tfhydra.config.hydra_api import hydra_line, mode_from_preflight


@pytest.mark.parametrize(
    ("overrides", "mode"),
    [([], None), (["hydra.mode=MULTIRUN"], RunMode.MULTIRUN), (["hydra.mode=RUN", "model=mlp"], RunMode.RUN)],
)
def test_the_preflight_reads_the_mode_hydra_would_compose(overrides, mode):
    checked = check_overrides(CONFIG_DIR, "config", overrides)
    assert checked.mode_known and checked.mode == mode
    hydra = Hydra.create_main_hydra2(task_name="train", config_search_path=create_config_search_path(str(CONFIG_DIR)))
    try:
        assert hydra.get_mode(config_name="config", overrides=overrides) == mode  # Hydra's own answer, composed
    finally:
        GlobalHydra.instance().clear()


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
