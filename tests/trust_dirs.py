"""Run and sweep directories as tfhydra writes them, without training, for the trust boundary's tests.

The readers refuse or accept a directory before TensorFlow is imported, so a directory that looks finished
(`.hydra/` files from a real composition, a completed record, placeholder weights and SavedModel) is enough."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from conftest import CONFIG_DIR
from omegaconf import OmegaConf

RUN_OVERRIDES = ["model=mlp", "trainer.epochs=1", "logging.histogram_freq=0"]
SWEEP_TASK = ["model=mlp", "optimizer.lr=1e-3,1e-4", "trainer.epochs=1"]
MARKER_ENV = "TFHYDRA_TEST_MARKER"


def conf_nodes():
    """Every mapping in tfhydra's own conf/*.yaml, at any depth."""

    def walk(node):
        if isinstance(node, dict):
            yield node
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    for path in CONFIG_DIR.rglob("*.yaml"):
        yield from walk(yaml.safe_load(path.read_text()))


def trusted_targets() -> set[str]:
    """Every `_target_` tfhydra's own configs name: what a config read back may hold."""
    return {node["_target_"] for node in conf_nodes() if isinstance(node.get("_target_"), str)}


def write_run(run: Path, overrides=RUN_OVERRIDES, status: str = "completed") -> Path:
    """A run directory with `.hydra/` as Hydra writes it for `overrides`, a record of `status`, placeholder files."""
    from tfhydra.record.run_record import RunRecord

    (run / ".hydra").mkdir(parents=True, exist_ok=True)
    (run / ".hydra" / "config.yaml").write_text(_job_yaml(overrides))
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(list(overrides)))
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {"job": {"num": 0}}}))
    RunRecord(status=status, run_dir=str(run), overrides=list(overrides)).write(run)
    for name in ("export/saved_model/saved_model.pb", "checkpoints/last.weights.h5"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_bytes(b"placeholder")
    return run


_JOB_YAML: dict[tuple, str] = {}


def _job_yaml(overrides) -> str:
    """`.hydra/config.yaml`'s text for `overrides` (as OmegaConf.save writes it), composed once per process and
    project: the property tests write a run per drawn case, and the composition is their setup, not what they test."""
    key = (tuple(overrides), os.getcwd(), os.environ.get("TFHYDRA_CONFIG_DIR"))
    if key not in _JOB_YAML:
        import tfhydra

        cfg = tfhydra.compose(list(overrides))
        _JOB_YAML[key] = OmegaConf.to_yaml(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]))
    return _JOB_YAML[key]


def write_sweep(sweep: Path, task=SWEEP_TASK, hydra=None, extra=None) -> Path:
    """A sweep directory: multirun.yaml as Hydra writes it (the parts tfhydra reads), and job 0's directory."""
    sweep.mkdir(parents=True, exist_ok=True)
    sources = [
        {"path": "hydra.conf", "schema": "pkg", "provider": "hydra"},
        {"path": str(CONFIG_DIR), "schema": "file", "provider": "main"},
    ]
    recorded = {
        "hydra": {
            "overrides": {"task": list(task), "hydra": list(hydra or ["hydra.mode=MULTIRUN"])},
            "runtime": {"config_sources": sources},
            "sweeper": {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "params": None},
        },
        "trainer": {"monitor": "val_accuracy", "monitor_mode": "max"},
    }
    for key, value in (extra or {}).items():
        node = recorded
        *parents, leaf = key.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    (sweep / "multirun.yaml").write_text(yaml.safe_dump(recorded))
    return sweep


def marker(directory: Path) -> Path:
    """Point tests/marker_code.py (and the `marker` resolver) at a file in `directory`; returns its path."""
    path = Path(directory) / "MARKER"
    os.environ[MARKER_ENV] = str(path)
    return path


def register_marker_resolver() -> None:
    """A resolver that writes the marker when an interpolation is resolved: stands for any resolver a user's
    process has (OmegaConf's, Hydra's, a project's own)."""
    import marker_code

    if not OmegaConf.has_resolver("marker"):
        OmegaConf.register_new_resolver("marker", lambda *args: marker_code.touch())
