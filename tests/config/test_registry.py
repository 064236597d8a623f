import pytest
from omegaconf import OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.config.registry import Registry


def test_register_and_lookup_by_name():
    things = Registry("thing")

    @things.register("double")
    def build_double(cfg, factor=1):
        return cfg.value * 2 * factor

    assert things.get("double") is build_double
    assert things.names() == ["double"]
    assert things.build(OmegaConf.create({"name": "double", "value": 21})) == 42
    assert things.build(OmegaConf.create({"name": "double", "value": 1}), factor=5) == 10


def test_unknown_name_lists_the_registered_ones():
    things = Registry("thing")
    things.register("b")(lambda cfg: None)
    things.register("a")(lambda cfg: None)
    with pytest.raises(ConfigError) as info:
        things.get("c")
    assert str(info.value) == "thing.name=c: no thing builder of that name; accepted: one of a, b"


def test_registering_a_name_twice_is_refused():
    things = Registry("thing")
    things.register("a")(lambda cfg: None)
    with pytest.raises(ValueError, match="registered twice"):
        things.register("a")(lambda cfg: None)


def test_a_registry_imports_the_modules_that_fill_it_on_its_first_lookup(tmp_path, monkeypatch):
    """mmengine's `Registry(..., locations=[...])`: making the registry imports nothing; the first lookup imports
    every location, whose builders register themselves; a location that fails is tried again at the next lookup."""
    import importlib
    import sys

    (tmp_path / "things_base.py").write_text(
        "from tfhydra.config.registry import Registry\n"
        "THINGS = Registry('thing', locations=['things_square', 'things_cube'])\n"
    )
    (tmp_path / "things_square.py").write_text(
        "from things_base import THINGS\n\n@THINGS.register('square', exponent=2)\ndef square(cfg):\n    return 2\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("things_base", "things_square", "things_cube"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    from things_base import THINGS

    assert "things_square" not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="things_cube"):
        THINGS.names()
    (tmp_path / "things_cube.py").write_text("from things_base import THINGS\nTHINGS.register('cube')(print)\n")
    importlib.invalidate_caches()  # the directory listing the finder keeps
    assert THINGS.names() == ["cube", "square"] and THINGS.traits("square") == {"exponent": 2}
    assert THINGS.build(OmegaConf.create({"name": "square"})) == 2
    for name in ("things_base", "things_square", "things_cube"):
        sys.modules.pop(name, None)


def test_target_builder_gets_node_keys_and_context():
    things = Registry("thing")
    node = OmegaConf.create({"_target_": "builtins.dict", "units": 8})
    assert things.build(node, spec="S") == {"units": 8, "spec": "S"}


def test_target_that_does_not_import_is_a_config_error():
    things = Registry("model")
    node = OmegaConf.create({"_target_": "no_such_package.build"})
    with pytest.raises(ConfigError) as info:
        things.build(node)
    assert "model._target_=no_such_package.build: cannot import it" in str(info.value)
    assert "accepted: an importable dotted path" in str(info.value)


def test_what_a_node_may_call_is_its_own_targets_resolved_at_any_depth():
    import tfhydra  # noqa: F401  (registers tfhydra.keras)
    from tfhydra.config.registry import callable_targets

    cfg = OmegaConf.create(
        {
            "keras": 2,
            "loss": {"_target_": "mylosses.Focal", "weights": [{"_target_": "mylosses.uniform"}], "gamma": 2},
            "metric": {"_target_": "${tfhydra.keras:metrics.AUC}", "name": "auc"},
        }
    )
    assert callable_targets(cfg.loss) == ["mylosses.Focal", "mylosses.uniform"]
    assert callable_targets(cfg.metric) == ["tf_keras.metrics.AUC"]  # what Hydra resolves, not the interpolation


def test_model_registry_matches_model_yaml_files():
    """conf/model/*.yaml maps one-to-one onto registered builders (same for every group)."""
    from conftest import CONFIG_DIR

    from tfhydra.compression.schemes import COMPRESSIONS
    from tfhydra.data.source import DATA
    from tfhydra.model.base import MODELS
    from tfhydra.optimizer.build import OPTIMIZERS
    from tfhydra.precision.build import PRECISIONS
    from tfhydra.strategy.build import STRATEGIES

    for group, registry in [
        ("model", MODELS),
        ("data", DATA),
        ("optimizer", OPTIMIZERS),
        ("precision", PRECISIONS),
        ("strategy", STRATEGIES),
        ("compression", COMPRESSIONS),
    ]:
        # an option that includes another one (data=npz_table: npz's source) is named by it, not by itself
        names = sorted(n for p in (CONFIG_DIR / group).glob("*.yaml") if (n := OmegaConf.load(p).get("name")))
        assert names == registry.names(), group


def test_every_builder_names_the_schema_its_yaml_names():
    """A registered option's `schema=` is the dataclass stored for `schema/<group>/<name>` (which
    conf/<group>/<name>.yaml names in its defaults list), and every stored option schema has a builder that names
    it: one type per option."""
    from conftest import CONFIG_DIR

    from tfhydra.compression.schemes import COMPRESSIONS
    from tfhydra.data.source import DATA
    from tfhydra.logger.trackers import LOGGERS
    from tfhydra.model.base import MODELS
    from tfhydra.optimizer.build import OPTIMIZERS
    from tfhydra.precision.build import PRECISIONS
    from tfhydra.runner.plan import SCHEMAS
    from tfhydra.strategy.build import STRATEGIES
    from tfhydra.task.base import TASKS

    registries = [MODELS, DATA, TASKS, OPTIMIZERS, PRECISIONS, STRATEGIES, COMPRESSIONS, LOGGERS]
    named = {f"{r.group}/{name}": r.schema(name) for r in registries for name in r.names() if r.schema(name)}
    options = {name: schema for name, schema in SCHEMAS.items() if "/" in name}
    assert named == options
    for name in options:
        group, option = name.split("/")
        assert f"/schema/{name}@" in (CONFIG_DIR / group / f"{option}.yaml").read_text(), name


def test_sweep_job_dirname_keeps_only_swept_overrides_and_is_one_folder():
    from tfhydra.config.jobnames import job_dirname

    argv = ["-m", "optimizer.lr=1e-3,5e-4", "trainer.epochs=1", "data.path=/a/b,/c/d"]
    assert (
        job_dirname(["optimizer.lr=1e-3", "trainer.epochs=1", "data.path=/a/b"], argv)
        == "optimizer.lr=1e-3,data.path=_a_b"
    )
    assert job_dirname(["trainer.epochs=1"], ["-m", "trainer.epochs=1"]) == "trainer.epochs=1"


def test_every_registry_has_the_names_its_room_declares():
    """Option names are declared once, in each room's TensorFlow-free checks module (the schema's rules read them);
    the builders register under the same names. A registered builder without a declared name (or a declared name
    nothing builds) fails here, for every registry."""
    from conftest import CONFIG_DIR

    from tfhydra.data import augment
    from tfhydra.data.augment_checks import AUGMENTATION_NAMES
    from tfhydra.export.base import EXPORT_FORMATS
    from tfhydra.export.checks import FORMATS
    from tfhydra.logger.trackers import LOGGERS
    from tfhydra.optimizer.build import SCHEDULES
    from tfhydra.optimizer.checks import SCHEDULE_NAMES
    from tfhydra.runner.plan import RULES
    from tfhydra.trainer.base import LOOPS
    from tfhydra.trainer.checks import LOOP_NAMES

    pairs = {
        "trainer.loop": (LOOPS.names(), LOOP_NAMES),
        "optimizer.schedule.name": (SCHEDULES.names(), SCHEDULE_NAMES),
        "export.formats": (EXPORT_FORMATS.names(), FORMATS),
        "data.augment": (sorted(augment.AUGMENTATION_LAYERS), AUGMENTATION_NAMES),
    }
    for key, (registered, declared) in pairs.items():
        assert registered == sorted(declared), key
    assert RULES["trainer.loop"].options == LOOP_NAMES
    assert RULES["optimizer.schedule.name"].options == SCHEDULE_NAMES
    assert RULES["export.formats"].ok(list(FORMATS)) and not RULES["export.formats"].ok(["coreml"])
    from tfhydra.strategy import build as strategy_build
    from tfhydra.strategy.checks import CLUSTER_RESOLVERS

    assert sorted(strategy_build.CLUSTER_RESOLVERS) == sorted(CLUSTER_RESOLVERS)
    # the logger group: every option but tensorboard (the trainer's own callback) is a registered tracker
    options = sorted(p.stem for p in (CONFIG_DIR / "logger").glob("*.yaml"))
    assert LOGGERS.names() == [o for o in options if o != "tensorboard"]
