"""`--help` (issue 38 item 1): tfhydra's own page, its descriptions taken from conf/'s YAML comments, one source.

The first test is the guard: every key of every option of every group has a description; a key added to conf/
without a comment fails it."""

from __future__ import annotations

import pytest
from conftest import run_cli

from tfhydra.cli.help import config_dirs, described_keys, undescribed
from tfhydra.config.project import CONFIG_DIR

GROUPS = ("model", "data", "optimizer", "precision", "strategy", "compression", "logger")


def composed(overrides):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def options(group):
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("group", GROUPS)
def test_every_key_of_every_option_has_a_description(group):
    dirs = config_dirs(CONFIG_DIR)
    missing = {}
    for option in options(group):
        cfg = composed([f"{group}=[{option}]" if group == "logger" else f"{group}={option}"])
        missing.update({key: option for key in undescribed(cfg, dirs)})
    assert missing == {}, f"keys without a `# description` comment in conf/: {missing}"


def test_a_key_without_a_comment_is_found(tmp_path):
    (tmp_path / "optimizer").mkdir()
    (tmp_path / "optimizer" / "mine.yaml").write_text("# mine\nname: mine\nlr: 0.1  # the rate\nbeta: 0.5\n")
    cfg = composed(["optimizer=adam"])
    cfg.hydra.runtime.choices.optimizer = "mine"
    cfg.optimizer = {"name": "mine", "lr": 0.1, "beta": 0.5}
    assert undescribed(cfg, [tmp_path, CONFIG_DIR]) == ["optimizer.beta"]


def test_a_key_shows_its_type_default_and_description():
    keys = {k.key: k for k in described_keys(composed(["optimizer=adamw"]), config_dirs(CONFIG_DIR))}
    assert (keys["data.batch_size"].kind, keys["data.batch_size"].default) == ("int", "32")
    assert keys["data.batch_size"].description.startswith("GLOBAL batch size")
    assert (
        keys["optimizer.weight_decay"].default == "0.004" and "decoupled" in keys["optimizer.weight_decay"].description
    )
    assert keys["trainer.early_stopping.monitor"].default == "${trainer.monitor}"  # as written, not resolved


def test_help_shows_the_groups_their_options_and_the_common_keys():
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    page = result.stdout
    assert "train a TensorFlow (tf_keras) model" in page and "powered by Hydra" not in page
    for group in GROUPS:
        assert f"\n{group}: " in page
    assert "    adamw " in page and "decoupled weight decay" in page and "adam (default)" in page
    assert "data.batch_size=32" in page and "GLOBAL batch size" in page
    assert "optimizer.lr=0.001" in page and "peak learning rate" in page


def test_help_section_prints_every_key_under_it_with_type_default_and_description():
    result = run_cli("--help", "optimizer", "optimizer=lion")
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert lines["optimizer.lr"].split()[1:3] == ["float", "0.0001"]
    assert "decay of the momentum" in lines["optimizer.beta_2"]
    assert "optimizer.schedule.name" in lines and "data.batch_size" not in lines
    wrong = run_cli("--help", "dat")
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == (
        "Error: --help dat: no such section (did you mean data?); accepted: a section or "
        "key of the config, e.g. data, trainer, optimizer.schedule"
    )
