"""Which sweeper, which launcher: tfhydra/sweep/kind.py answers for everyone, and no other module reads a sweeper's
or launcher's `_target_` (parsed with ast, as tests/trust/test_trust.py does for YAML readers)."""

import ast
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tfhydra.sweep.kind import (
    LAUNCHER_KINDS,
    SWEEPER_KINDS,
    expands_grid,
    in_sweep,
    launcher_kind,
    plugin_target,
    sweeper_kind,
)

ROOT = Path(__file__).resolve().parents[2]
THE_MODULE = ROOT / "tfhydra" / "sweep" / "kind.py"


def config(sweeper: str | None = None, launcher: str | None = None):
    hydra = {}
    if sweeper is not None:
        hydra["sweeper"] = {"_target_": sweeper, "params": {}}
    if launcher is not None:
        hydra["launcher"] = {"_target_": launcher}
    return OmegaConf.create({"hydra": hydra, "trainer": {"epochs": 1}})


@pytest.mark.parametrize(
    "target,kind",
    [
        ("hydra_plugins.tfhydra_basic.basic_sweeper.BasicSweeper", "tfhydra_basic"),
        ("hydra._internal.core_plugins.basic_sweeper.BasicSweeper", "basic"),
        ("hydra_plugins.tfhydra_optuna.optuna_sweeper.OptunaSweeper", "tfhydra_optuna"),
        ("hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper", "optuna"),
        ("my_package.sweepers.NevergradSweeper", "other"),
    ],
)
def test_each_sweeper_target_has_its_kind(target, kind):
    assert sweeper_kind(config(sweeper=target)) == kind
    assert sweeper_kind({"hydra": {"sweeper": {"_target_": target}}}) == kind  # multirun.yaml read as a dict
    assert expands_grid(config(sweeper=target)) == (kind in ("tfhydra_basic", "basic"))
    assert kind in SWEEPER_KINDS


@pytest.mark.parametrize(
    "target,kind",
    [
        ("hydra_plugins.tfhydra_launcher.tfhydra_launcher.TfhydraLauncher", "tfhydra"),
        ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", "basic"),
        ("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", "joblib"),
        ("hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher", "submitit_slurm"),
        ("hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher", "submitit_local"),
        ("hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher", "ray"),
        ("my_package.Launcher", "other"),
    ],
)
def test_each_launcher_target_has_its_kind(target, kind):
    assert launcher_kind(config(launcher=target)) == kind
    assert plugin_target(config(launcher=target), "launcher") == target
    assert kind in LAUNCHER_KINDS


def test_no_plugin_is_none_and_outside_hydra_there_is_no_sweep():
    assert sweeper_kind(config()) == launcher_kind(config()) == "none"
    assert sweeper_kind({}) == launcher_kind(None) == "none"  # None: the running job's, and none runs here
    assert in_sweep() is False


def test_the_shipped_defaults_are_tfhydra_s_own():
    """conf/hydra/sweeper/ and the launcher plugin name tfhydra's own by the targets this module knows."""
    from hydra_plugins.tfhydra_launcher.tfhydra_launcher import TfhydraLauncherConf

    sweeper = OmegaConf.load(ROOT / "conf" / "hydra" / "sweeper" / "tfhydra_basic.yaml")
    launcher = OmegaConf.structured(TfhydraLauncherConf)
    assert sweeper_kind({"hydra": {"sweeper": sweeper}}) == "tfhydra_basic"
    assert launcher_kind({"hydra": {"launcher": launcher}}) == "tfhydra"


# ---- the guard: no `_target_` test about a sweeper or launcher outside tfhydra/sweep/kind.py -------------------

PLUGIN = re.compile(r"Sweeper\b|Launcher\b|joblib|submitit|hydra_ray|tfhydra_optuna|optuna\.")
ABOUT_PLUGINS = re.compile(r"sweeper|launcher", re.IGNORECASE)
KINDS = set(SWEEPER_KINDS) | set(LAUNCHER_KINDS)


def target_tests(source: str) -> list[int]:
    """Lines of `source` that read a sweeper's or launcher's `_target_` (`launcher.get("_target_")`,
    `cfg.hydra.sweeper._target_`, `select(cfg, "hydra.launcher._target_")`) or test a string against a plugin's
    class path (`"joblib" in target`, `target.endswith("BasicSweeper")`)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        receiver = None
        if isinstance(node, ast.Attribute) and node.attr == "_target_":
            receiver = node.value
        elif isinstance(node, ast.Subscript) and _is(node.slice, "_target_"):
            receiver = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and _is(node.args[0], "_target_")
        ):
            receiver = node.func.value
        if receiver is not None and ABOUT_PLUGINS.search(ast.unparse(receiver)):
            found.add(node.lineno)
        if isinstance(node, ast.Call) and any(
            isinstance(a, ast.Constant)
            and isinstance(a.value, str)
            and re.fullmatch(r"hydra\.(sweeper|launcher)\._target_", a.value)
            for a in node.args
        ):
            found.add(node.lineno)
        operands, substring = [], True
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            substring = any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("endswith", "startswith")
        ):
            operands = list(node.args)
        if any(
            isinstance(o, ast.Constant)
            and isinstance(o.value, str)
            and PLUGIN.search(o.value)
            and (substring or o.value not in KINDS)
            for o in operands
        ):  # a kind compared whole is an answer
            found.add(node.lineno)
    return sorted(found)


def _is(node: ast.AST, text: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == text


def test_only_the_kind_module_tests_a_sweeper_or_launcher_target():
    sources = [*(ROOT / "tfhydra").rglob("*.py"), *(ROOT / "hydra_plugins").rglob("*.py")]
    assert len(sources) > 100 and THE_MODULE in sources  # the scan read the package
    found = {
        f"{p.relative_to(ROOT)}:{line}" for p in sources if p != THE_MODULE for line in target_tests(p.read_text())
    }
    assert found == set()
    assert target_tests(THE_MODULE.read_text())  # the one module does test them (the guard can see it)


@pytest.mark.parametrize(
    "line",
    [
        'ok = "joblib" not in str(launcher.get("_target_", ""))',
        'ok = str(cfg.hydra.sweeper._target_).endswith("BasicSweeper")',
        'ok = OmegaConf.select(cfg, "hydra.launcher._target_", default=None)',
        'ok = "hydra_ray_launcher" in target',
        'ok = "submitit" in target',
        'ok = target == "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"',
        'ok = HydraConfig.get().launcher["_target_"]',
    ],
)
def test_the_guard_fails_on_a_scattered_target_test(line):
    assert target_tests(line) == [1]


@pytest.mark.parametrize(
    "line",
    [
        'ok = "_target_" in cfg_optimizer',  # a user's optimizer: not about sweeps
        'ok = cfg.model.get("_target_", cfg.model.get("name"))',
        'raise ConfigError("hydra/launcher", "submitit_slurm", "a machine with srun")',  # prose, not a test
        'ok = launcher_kind(cfg) == "joblib"',  # asking the kind module
        'ok = kind in ("submitit_slurm", "submitit_local")',
    ],
)
def test_the_guard_lets_other_targets_and_kind_questions_pass(line):
    assert target_tests(line) == []
