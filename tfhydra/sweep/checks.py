"""What the run plan checks in the `sweep` section (screen, then promote: tfhydra/sweep/stages.py): ranges, and
a promotion with nothing to screen. No TensorFlow. What needs the command line (a single run, the sweeper, how
many settings the grid has) is the pre-flight's (tfhydra/sweep/preflight_checks.py: `check_stages_command`)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, choice, integer, number, optional
from tfhydra.sweep.folds import MAX_FOLDS

# The sweep section's ranges, read by the schema's checks (tfhydra/config/schema.py); null leaves each off.
RULES: dict[str, Rule] = {
    "sweep.screen.fraction": optional(number(0, 1, high_open=False)),
    "sweep.screen.epochs": optional(integer(1)),
    "sweep.promote": optional(integer(1)),
    "sweep.folds": optional(integer(2, MAX_FOLDS)),  # k-fold as a sweep (tfhydra/sweep/folds.py)
    "sweep.decide": choice(True, False),  # decide mode (tfhydra/sweep/decide.py) fills the three above
    "sweep.cluster_timeout": number(0),  # tfhydra/launch/cluster_watch.py
}


def check_stages(cfg: DictConfig) -> None:
    """`sweep.promote` needs a screen that trains less than the full run, and a screen needs something to promote."""
    promote = OmegaConf.select(cfg, "sweep.promote", default=None)
    fraction = OmegaConf.select(cfg, "sweep.screen.fraction", default=None)
    epochs = OmegaConf.select(cfg, "sweep.screen.epochs", default=None)
    if OmegaConf.select(cfg, "sweep.decide") is True:
        return  # decide mode chooses what is not set (tfhydra/sweep/decide.py)
    if promote is not None and fraction is None and epochs is None:
        raise ConfigError(
            "sweep.promote",
            promote,
            "sweep.promote with sweep.screen.fraction and/or sweep.screen.epochs (what the screen trains on), or null",
            "nothing to screen: set what the screen trains on",
        )
    if promote is None and (fraction is not None or epochs is not None):
        key, value = ("sweep.screen.fraction", fraction) if fraction is not None else ("sweep.screen.epochs", epochs)
        raise ConfigError(
            key,
            value,
            "sweep.promote=N with it (how many settings go on to all the data), or experiment=prescreen to screen only",
            "a screen without sweep.promote promotes nothing",
        )


CHECKS = (check_stages,)
