"""A run's Hydra side: whether it runs under Hydra, its run directory and overrides there, and the `.hydra/`
files a run started from Python keeps as Hydra would, so evaluate and resume can use it."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.record.rundir import RunPaths


def under_hydra() -> bool:
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.initialized()


def hydra_run_dir() -> Path:
    if not under_hydra():
        raise ConfigError(
            "run_dir",
            None,
            "a run directory (pass run_dir= when calling tfhydra.run outside Hydra)",
            "no Hydra run directory",
        )
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def chosen_run_dir(cfg: DictConfig, key: str = "hydra.run.dir") -> Path:
    """Where a run started from Python without `run_dir` goes: where the command would put it, the config's
    `hydra.run.dir` (`outputs/<date>/<time.micro>` below the working directory unless the config says otherwise;
    `key="hydra.sweep.dir"`: a sweep's); a config composed without its hydra node takes tfhydra's own
    (conf/tfhydra.yaml)."""
    from hydra.core.utils import setup_globals

    setup_globals()  # Hydra's `now` resolver, cached per config: the time is read once
    if OmegaConf.select(cfg, key, default=None) is None:
        from tfhydra.config.project import CONFIG_DIR
        from tfhydra.trust.readers import plain_file  # the one YAML reader, here of tfhydra's own conf/

        cfg = OmegaConf.create({"hydra": (plain_file(CONFIG_DIR / "tfhydra.yaml", CONFIG_DIR) or {})["hydra"]})
    return Path(OmegaConf.select(cfg, key)).absolute()


def hydra_overrides(cfg: DictConfig) -> list[str]:
    """The command line's overrides: Hydra's, or those a config composed with its hydra node carries."""
    if under_hydra():
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    return list(OmegaConf.select(cfg, "hydra.overrides.task", default=None) or [])


def without_hydra(cfg: DictConfig) -> DictConfig:
    return OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"]) if "hydra" in cfg else cfg


def write_hydra_files(paths: RunPaths, job_cfg: DictConfig, cfg: DictConfig) -> None:
    """`.hydra/` for a run started from Python, as Hydra writes it: config.yaml (the job's config),
    overrides.yaml and hydra.yaml. A config composed with its hydra node (`tfhydra.compose`) carries the
    overrides and the config directory; without one they are [] and tfhydra's own conf/."""
    from tfhydra.record.report import write_atomically

    paths.hydra.mkdir(parents=True, exist_ok=True)
    hydra_node = OmegaConf.select(cfg, "hydra", default=None)
    if hydra_node is not None and OmegaConf.is_missing(hydra_node.runtime, "output_dir"):  # composed: Hydra's job
        hydra_node = OmegaConf.merge(hydra_node, {"runtime": {"output_dir": str(paths.root.resolve())}})  # sets it
    if hydra_node is None:
        from tfhydra.config.project import CONFIG_DIR

        hydra_node = OmegaConf.create(
            {
                "runtime": {
                    "output_dir": str(paths.root.resolve()),
                    "config_sources": [{"path": str(CONFIG_DIR), "schema": "file", "provider": "main"}],
                },
                "job": {"name": "train", "config_name": "config"},
                "overrides": {"task": []},
            }
        )
    write_atomically(paths.config, OmegaConf.to_yaml(job_cfg))
    write_atomically(paths.overrides, OmegaConf.to_yaml(OmegaConf.create(hydra_overrides(cfg))))
    write_atomically(paths.hydra_config, OmegaConf.to_yaml(OmegaConf.create({"hydra": hydra_node})))
