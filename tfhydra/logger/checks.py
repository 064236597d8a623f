"""What the run plan checks in the `logger` group: a tracker whose package is not installed. No TensorFlow,
and nothing imported: `importlib.util.find_spec` only looks. A tracker that fails while the run trains is
not a config mistake and never stops it (trackers.py); a missing package is, and is said before any work."""

from __future__ import annotations

import importlib.util

from omegaconf import DictConfig, ListConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.config.schema import Rule, integer, is_int, number

# logger option -> (modules it imports, the extra that installs them). MLflow's SQLite store (the default)
# needs SQLAlchemy and Alembic, which mlflow-skinny does not bring.
PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "mlflow": (("mlflow", "sqlalchemy", "alembic"), "mlflow"),
    "wandb": (("wandb",), "wandb"),
}


def check_installed(cfg: DictConfig) -> None:
    loggers = OmegaConf.select(cfg, "logger", default=None)
    for name in loggers if isinstance(loggers, DictConfig) else ():
        if str(name) not in PACKAGES:  # a logger that needs nothing more installed
            continue
        modules, extra = PACKAGES[str(name)]
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigError(
                "logger",
                name,
                f"pip install -e '.[{extra}]' (or tfhydra[{extra}]), then the same "
                "command; or a logger list without it",
                f"{', '.join(missing)} not installed",
            )


CHECKS = (check_installed,)


# The logging and logger sections' ranges and choices, read by the schema's checks (tfhydra/config/schema.py).
RULES: dict[str, Rule] = {
    "logging.histogram_freq": integer(0),
    "logging.images_freq": integer(0),
    "logging.gradients": Rule("true or false", lambda v: isinstance(v, bool)),
    "logging.profile_batch": Rule(
        "0 (off), a batch number >= 1, or [start, stop] with 1 <= start <= stop",
        lambda v: (
            (is_int(v) and v >= 0)
            or (
                isinstance(v, (list, ListConfig))
                and len(v) == 2
                and all(is_int(b) and b >= 1 for b in v)
                and v[0] <= v[1]
            )
        ),
    ),
    "logging.update_freq": Rule(
        "'epoch', 'batch' or an integer >= 1", lambda v: v in ("epoch", "batch") or (is_int(v) and v >= 1)
    ),
    "logger.mlflow.timeout": number(0),
    "logger.mlflow.experiment_name": Rule("a non-empty name", lambda v: isinstance(v, str) and v.strip() != ""),
    "logger.wandb.mode": Rule(
        "null ($WANDB_MODE, else offline), offline, online or disabled",
        lambda v: v in (None, "offline", "online", "disabled"),
    ),
}
