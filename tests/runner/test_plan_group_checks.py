"""The groups' config-only checks that the run plan gathers, tested directly (in milliseconds) and held against
the tf_keras they stand in for."""

import inspect

import pytest
import tf_keras as keras

from tfhydra.config.errors import ConfigError
from tfhydra.data.augment_checks import AUGMENTATION_NAMES
from tfhydra.runner.plan import plan_run
from tfhydra.trainer.checks import KERAS_LOSSES, KERAS_METRICS


def _needs_arguments(cls) -> bool:
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return any(
        p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters
    )


def _buildable_names(module, skip) -> set[str]:
    """Public functions and argument-free classes of a tf_keras module: what a config may name."""
    return {
        name
        for name in dir(module)
        if not name.startswith("_")
        and name not in skip
        and (
            inspect.isfunction(getattr(module, name))
            or inspect.isclass(getattr(module, name))
            and not _needs_arguments(getattr(module, name))
        )
    }


def test_loss_names_are_the_installed_tf_keras_losses():
    assert KERAS_LOSSES == _buildable_names(keras.losses, {"deserialize", "serialize", "get", "Loss", "Reduction"})
    for name in KERAS_LOSSES:
        assert callable(keras.losses.get(name))


def test_metric_names_are_the_installed_tf_keras_metrics():
    skip = {
        "deserialize",
        "serialize",
        "get",
        "Metric",
        "Mean",
        "MeanTensor",
        "Sum",
        "MeanMetricWrapper",
        "experimental",
    }
    aliases = {"accuracy", "acc", "crossentropy", "ce"}  # resolved by Keras' compile itself
    assert KERAS_METRICS == _buildable_names(keras.metrics, skip) | aliases


def test_activation_names_are_the_installed_tf_keras_activations():
    from tfhydra.model.checks import KERAS_ACTIVATIONS

    assert set(KERAS_ACTIVATIONS) == _buildable_names(keras.activations, {"get", "serialize", "deserialize"})


def test_augmentation_names_are_the_layers_the_pipeline_builds():
    from tfhydra.data.augment import AUGMENTATION_LAYERS

    assert set(AUGMENTATION_NAMES) == set(AUGMENTATION_LAYERS)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["trainer.loss=mean_squared_eror"],
            "trainer.loss=mean_squared_eror: unknown loss; accepted: a Keras loss name "
            "such as sparse_categorical_crossentropy (did you mean mean_squared_error",
        ),
        (["trainer.metrics=[accuracy,precison]"], "trainer.metrics[1]=precison: unknown metric"),
        (
            ["trainer.metrics=[]"],
            "trainer.monitor=val_accuracy: not a metric this run logs; accepted: one of loss, val_loss",
        ),
        (
            ["trainer.early_stopping.patience=3", "trainer.early_stopping.monitor=val_los"],
            "trainer.early_stopping.monitor=val_los: not a metric this run logs",
        ),
        (
            ["data.augment=[random_flip,{name:random_blur}]"],
            "data.augment[1].name=random_blur: unknown augmentation layer",
        ),
        (
            ["strategy=mirrored", "strategy.devices=[/cpu:0,/cpu:1,/cpu:2]", "data.batch_size=32"],
            "data.batch_size=32: not divisible by the replica count; accepted: a multiple of the 3 replicas",
        ),
        (
            ["compression=prune_quantize", "trainer.epochs=3", "compression.quantize_epochs=4"],
            "compression.quantize_epochs=4: more epochs than the run trains",
        ),
    ],
)
def test_the_plan_refuses_config_only_mistakes(compose_cfg, overrides, message):
    with pytest.raises(ConfigError) as raised:
        plan_run(compose_cfg(overrides))
    assert str(raised.value).startswith(message), str(raised.value)


def test_the_plan_lists_the_phases(compose_cfg):
    plan = plan_run(
        compose_cfg(
            [
                "compression=prune_quantize",
                "trainer.epochs=5",
                "compression.quantize_epochs=2",
                "compression.start_epoch=1",
            ]
        )
    )
    assert [(p.label, p.epochs, p.directory) for p in plan.phases] == [
        ("pretrain", 1, "phases/0_pretrain"),
        ("prune", 2, "phases/1_prune"),
        ("prune_quantize", 2, None),
    ]
    assert plan.phases[1].compression["name"] == "prune" and plan.final_phase.compression["name"] == "prune_quantize"
    assert [p.label for p in plan_run(compose_cfg([])).phases] == ["none"]


def test_a_user_metric_or_a_mirrored_strategy_without_fixed_devices_passes(compose_cfg):
    """Each passes for the reason named: the user's metric makes val_auc a metric the run logs, and without fixed
    devices the replica count is known only on the machine. Without that reason the same check refuses."""
    user_metric = ["trainer.metrics=[{_target_:tf_keras.metrics.AUC,name:auc}]", "trainer.monitor=val_auc"]
    assert [p.label for p in plan_run(compose_cfg(user_metric)).phases] == ["none"]
    with pytest.raises(ConfigError, match="trainer.monitor=val_auc: not a metric this run logs"):
        plan_run(compose_cfg(user_metric[1:]))
    assert [p.label for p in plan_run(compose_cfg(["strategy=mirrored", "data.batch_size=33"])).phases] == ["none"]
    with pytest.raises(ConfigError, match="data.batch_size=33: not divisible by the replica count"):
        plan_run(compose_cfg(["strategy=mirrored", "strategy.devices=[/cpu:0,/cpu:1]", "data.batch_size=33"]))


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["optimizer.schedule.name=cosine", "optimizer.lr=1e-3", "optimizer.schedule.min_lr=1e-2"],
            (
                "optimizer.schedule.min_lr=0.01: the floor is above the peak rate; "
                "accepted: a rate <= optimizer.lr (0.001)"
            ),
        ),
        (
            ["optimizer.schedule.name=reduce_on_plateau", "optimizer.schedule.min_lr=1"],
            "optimizer.schedule.min_lr=1: the floor is above the peak rate",
        ),
        (
            ["optimizer.schedule.name=cosine", "trainer.epochs=3", "optimizer.schedule.warmup_epochs=3"],
            "optimizer.schedule.warmup_epochs=3: the warm-up would take the whole schedule; accepted: fewer than "
            "trainer.epochs (3)",
        ),
        # issue 25: the schedule is built per phase, so the warm-up must fit each phase, not the whole run
        (
            [
                "optimizer.schedule.name=cosine",
                "trainer.epochs=10",
                "compression=prune",
                "compression.start_epoch=5",
                "optimizer.schedule.warmup_epochs=6",
            ],
            "optimizer.schedule.warmup_epochs=6: the warm-up would take the whole schedule; accepted: fewer than the 5 "
            "epochs of the pretrain phase",
        ),
        (
            [
                "optimizer.schedule.name=cosine",
                "trainer.epochs=10",
                "compression=prune_quantize",
                "compression.quantize_epochs=2",
                "optimizer.schedule.warmup_epochs=3",
            ],
            "optimizer.schedule.warmup_epochs=3: the warm-up would take the whole schedule; accepted: fewer than the 2 "
            "epochs of the prune_quantize phase",
        ),
        (
            ["optimizer.schedule.name=piecewise", "optimizer.schedule.boundaries_epochs=[15,10]"],
            "optimizer.schedule.boundaries_epochs=[15, 10]: decreasing",
        ),
        (
            ["optimizer.schedule.name=piecewise", "optimizer.schedule.multipliers=[1,0.1]"],
            "optimizer.schedule.multipliers=[1, 0.1]: does not match boundaries_epochs; accepted: 3 multipliers",
        ),
    ],
)
def test_schedules_that_cannot_mean_what_they_say_are_refused(compose_cfg, overrides, message):
    with pytest.raises(ConfigError) as raised:
        plan_run(compose_cfg(overrides))
    assert str(raised.value).startswith(message), str(raised.value)


def test_architecture_names_are_the_installed_tf_keras_applications():
    from tfhydra.model.checks import KERAS_APPLICATIONS

    assert list(KERAS_APPLICATIONS) == sorted(n for n in dir(keras.applications) if n[:1].isupper())


@pytest.mark.parametrize(
    "overrides,fragments",
    [
        (["model=cnnn"], ["model=cnnn: no such model option (did you mean cnn?)"]),
        (["trainer.epoch=3"], ["trainer.epoch=3: unknown key (did you mean epochs?)"]),
        (
            ["model=keras_app", "model.arch=ResNet5O"],
            [
                "model.arch=ResNet5O: not an accepted value (did you mean ResNet50",
                "and 6",
                "more (all of them: model.arch in tfhydra/model/checks.py)",
            ],
        ),
        (["trainer.loss=categorical_crossentopy"], ["unknown loss", "(did you mean categorical_crossentropy"]),
        (["trainer.metrics=[acuracy]"], ["unknown metric", "(did you mean accuracy"]),
    ],
)
def test_a_misspelt_name_gets_the_nearest_ones(overrides, fragments):
    """One line, the nearest valid names first; a list of more than ten is shortened."""
    from conftest import CONFIG_DIR

    from tfhydra.cli.preflight import check_overrides

    with pytest.raises(ConfigError) as raised:
        check_overrides(CONFIG_DIR, "config", overrides)
    message = str(raised.value)
    assert all(f in message for f in fragments), message
    assert len(message) < 400 and "\n" not in message
