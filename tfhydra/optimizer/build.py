"""Optimizer builders `build_x(cfg_optimizer, learning_rate, **clipping) -> tf_keras optimizer`,
and learning-rate schedules `build_x(cfg_schedule, lr, steps_per_epoch, epochs)`.

`optimizer.lr` is the peak learning rate; `optimizer.schedule` shapes it over training.
Schedules are given in epochs (what users reason in) and converted to optimizer steps
with the run's real steps per epoch.
"""

from __future__ import annotations

from typing import cast

from omegaconf import DictConfig, OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.config.hydra_api import locate
from tfhydra.config.registry import Registry, instantiate_target
from tfhydra.optimizer.accumulate import accumulating
from tfhydra.optimizer.schemas import SCHEMAS
from tfhydra.platform.keras_lib import keras

OPTIMIZERS = Registry("optimizer", locations=["tfhydra.optimizer.build"])  # the builders below
SCHEDULES = Registry("optimizer.schedule", locations=["tfhydra.optimizer.build"])


def build_optimizer(
    cfg_optimizer: DictConfig, steps_per_epoch: int, epochs: int, clipping: dict | None = None, accumulate: int = 1
):
    """clipping: the trainer's optimizer arguments: Keras' `clipnorm` / `clipvalue` / `global_clipnorm` and
    `use_ema` / `ema_momentum` (trainer.ema), None entries ignored. `accumulate`: trainer.accumulate_steps, the
    batches per update (tfhydra/optimizer/accumulate.py); a schedule then counts updates, not batches."""
    clipping = {k: v for k, v in (clipping or {}).items() if v is not None}
    if accumulate > steps_per_epoch * epochs:  # the run would end `completed` without a single update
        raise ConfigError(
            "trainer.accumulate_steps",
            accumulate,
            f"an integer in [1, {steps_per_epoch * epochs}] (the run's batches: {steps_per_epoch} an epoch x "
            f"{epochs} epoch(s))",
            f"no optimizer update in the whole run: it has {steps_per_epoch * epochs} batches",
        )
    updates_per_epoch = max(1, steps_per_epoch // accumulate)
    if "_target_" in cfg_optimizer:
        optimizer = build_target_optimizer(cfg_optimizer, updates_per_epoch, epochs, clipping)
    else:
        # a float: `optimizer.lr=50` composes to an int, which Keras 3's optimizers refuse (tf_keras casts it)
        learning_rate = build_schedule(cfg_optimizer.schedule, float(cfg_optimizer.lr), updates_per_epoch, epochs)
        optimizer = OPTIMIZERS.get(cfg_optimizer.name)(cfg_optimizer, learning_rate, **clipping)
    return accumulating(optimizer, accumulate)


def build_target_optimizer(cfg_optimizer: DictConfig, steps_per_epoch: int, epochs: int, clipping: dict):
    """A user's `_target_` optimizer gets `optimizer.lr` (else its own `learning_rate` key, else its constructor's
    default) shaped by `optimizer.schedule`, as `learning_rate=`, when its constructor takes one; a sweep over
    `optimizer.lr` then changes it. One that takes none is refused when `lr` or a schedule is set: they would be
    dropped without a word."""
    schedule = cfg_optimizer.get("schedule")
    scheduled = schedule is not None and schedule.get("name") not in (None, "constant")
    default = _learning_rate_default(locate(cfg_optimizer._target_))
    if default is _TAKES_NONE:
        if scheduled or "lr" in cfg_optimizer:
            key = "optimizer.schedule.name" if scheduled else "optimizer.lr"
            raise ConfigError(
                key,
                schedule.name if scheduled else cfg_optimizer.lr,
                "constant (the default) and no optimizer.lr, or a _target_ whose constructor takes learning_rate",
                f"{cfg_optimizer._target_} takes no learning_rate",
            )
        node = OmegaConf.masked_copy(cfg_optimizer, [str(k) for k in cfg_optimizer if k != "schedule"])
        return instantiate_target(node, "optimizer", **clipping)
    lr = cfg_optimizer.get("lr", cfg_optimizer.get("learning_rate", default))
    if schedule is not None and isinstance(lr, (int, float)):
        lr = build_schedule(schedule, lr, steps_per_epoch, epochs)
    node = OmegaConf.masked_copy(
        cfg_optimizer, [str(k) for k in cfg_optimizer if k not in ("schedule", "lr", "learning_rate")]
    )
    return instantiate_target(node, "optimizer", learning_rate=lr, **clipping)


_TAKES_NONE = object()


def _learning_rate_default(target):
    """The default of `target`'s `learning_rate` parameter (None when it has none); _TAKES_NONE when it takes no
    such argument."""
    import inspect

    try:
        parameters = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return _TAKES_NONE
    parameter = parameters.get("learning_rate")
    if parameter is None:
        return _TAKES_NONE
    return None if parameter.default is inspect.Parameter.empty else parameter.default


# optimizer=<name>: the tf_keras class each option builds. Every key of the option's conf/optimizer/<name>.yaml
# but `name`, `lr` and `schedule` is the class's own keyword argument of the same name (defaults live there).
KERAS_CLASSES = {
    "adam": "Adam",
    "sgd": "SGD",
    "adamw": "AdamW",
    "rmsprop": "RMSprop",
    "nadam": "Nadam",
    "lion": "Lion",
    "adafactor": "Adafactor",
}


def keras_optimizer(class_name: str):
    def build(cfg, learning_rate, **clipping) -> keras.optimizers.Optimizer:
        given = cast(dict, OmegaConf.to_container(cfg))  # the optimizer node: a DictConfig
        arguments = {str(k): v for k, v in given.items() if k not in ("name", "lr", "schedule")}
        optimizer_class = getattr(keras.optimizers, class_name)
        check_arguments(optimizer_class, arguments, set(clipping))
        return optimizer_class(learning_rate=learning_rate, **arguments, **clipping)

    build.__doc__ = f"tf_keras.optimizers.{class_name} with the option's keys as its arguments."
    return build


def check_arguments(optimizer_class, arguments: dict, set_elsewhere: set[str]) -> None:
    """`+optimizer.momentum2=0.9` reaches the Keras class as a keyword it does not take: one line naming the key and
    the class's own arguments (tf_keras says only "kwargs should be empty", with a traceback). Those the trainer
    sets (clipping, EMA) and the learning rate are not the option's to give."""
    import inspect

    own = [
        name
        for name, p in inspect.signature(optimizer_class).parameters.items()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name not in {"learning_rate", "name", *set_elsewhere}
    ]
    for key, value in arguments.items():
        if key not in own:
            why = f"not an argument of {optimizer_class.__name__} (optimizer.lr is the rate)"
            raise ConfigError(f"optimizer.{key}", value, own, why)


for _name, _class in KERAS_CLASSES.items():
    OPTIMIZERS.register(_name, schema=SCHEMAS[f"optimizer/{_name}"])(keras_optimizer(_class))


def build_schedule(cfg_schedule: DictConfig, lr: float, steps_per_epoch: int, epochs: int):
    return SCHEDULES.get(cfg_schedule.name)(cfg_schedule, lr, steps_per_epoch, epochs)


@SCHEDULES.register("constant")
def build_constant(cfg, lr: float, steps_per_epoch: int, epochs: int):
    return lr


@SCHEDULES.register("reduce_on_plateau")
def build_reduce_on_plateau(cfg, lr: float, steps_per_epoch: int, epochs: int):
    """A constant rate that the ReduceLROnPlateau callback lowers (see plateau_callback)."""
    return lr


@SCHEDULES.register("cosine")
def build_cosine(cfg, lr: float, steps_per_epoch: int, epochs: int):
    """Linear warm-up from 0 to `lr` over `warmup_epochs`, then cosine decay to `min_lr` at the last step."""
    warmup = int(round(cfg.warmup_epochs * steps_per_epoch))  # below the run's steps: checked by the run plan
    total = epochs * steps_per_epoch
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if warmup else lr,
        decay_steps=total - warmup,
        alpha=cfg.min_lr / lr,
        warmup_target=lr if warmup else None,
        warmup_steps=warmup,
    )


@SCHEDULES.register("exponential")
def build_exponential(cfg, lr: float, steps_per_epoch: int, epochs: int):
    """lr * decay_rate ** (step / (decay_epochs * steps_per_epoch)); `staircase` steps it per period."""
    return keras.optimizers.schedules.ExponentialDecay(
        lr,
        decay_steps=max(1, int(round(cfg.decay_epochs * steps_per_epoch))),
        decay_rate=cfg.decay_rate,
        staircase=cfg.staircase,
    )


@SCHEDULES.register("piecewise")
def build_piecewise(cfg, lr: float, steps_per_epoch: int, epochs: int):
    """lr * multipliers[i] from epoch boundaries_epochs[i-1] on (one more multiplier than boundaries)."""
    boundaries, multipliers = list(cfg.boundaries_epochs), list(cfg.multipliers)  # matched by the run plan
    return keras.optimizers.schedules.PiecewiseConstantDecay(
        [int(b * steps_per_epoch) for b in boundaries], [lr * m for m in multipliers]
    )


def plateau_callback(cfg_schedule: DictConfig | None, monitor: str, mode: str) -> list[keras.callbacks.Callback]:
    """`optimizer.schedule.name=reduce_on_plateau` is a callback; None: a user's optimizer without a schedule."""
    if cfg_schedule is None or cfg_schedule.name != "reduce_on_plateau":
        return []
    return [
        keras.callbacks.ReduceLROnPlateau(
            monitor=monitor,
            mode=mode,
            factor=cfg_schedule.factor,
            patience=cfg_schedule.patience,
            min_lr=cfg_schedule.min_lr,
        )
    ]
