"""What the run plan checks in the `logger` group: a tracker whose package is not installed. No TensorFlow,
and nothing imported: `importlib.util.find_spec` only looks. A tracker that fails while the run trains is
not a config mistake and never stops it (trackers.py); a missing package is, and is said before any work."""
from __future__ import annotations

import importlib.util

from omegaconf import DictConfig, OmegaConf

from tfhydra.errors import ConfigError

# logger option -> (modules it imports, the extra that installs them). MLflow's SQLite store (the default)
# needs SQLAlchemy and Alembic, which mlflow-skinny does not bring.
PACKAGES = {"mlflow": (("mlflow", "sqlalchemy", "alembic"), "mlflow"), "wandb": (("wandb",), "wandb")}


def check_installed(cfg: DictConfig) -> None:
    loggers = OmegaConf.select(cfg, "logger", default=None)
    for name in loggers if isinstance(loggers, DictConfig) else ():
        modules, extra = PACKAGES.get(name, ((), None))
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            raise ConfigError("logger", name, f"pip install -e '.[{extra}]' (or tfhydra[{extra}]), then the same "
                              "command; or a logger list without it", f"{', '.join(missing)} not installed")


CHECKS = (check_installed,)
