"""The model a phase trains, built inside the strategy's scope: the model from the data's spec (its output in
float32 under mixed precision), its compression for this phase, the optimizer with the trainer's clipping, EMA and
recovery scaling, compiled with the loss and metrics. tfhydra/runner/phase.py's `PhaseRunner.build_model` calls it.
"""

from __future__ import annotations

from tfhydra.compression.phases import compress_model
from tfhydra.config.contracts import Phase
from tfhydra.model.build import build_model
from tfhydra.model.freeze import freeze_layers
from tfhydra.model.linear_start import start_at_linear_fit, starts_linear
from tfhydra.optimizer.build import build_optimizer
from tfhydra.platform.keras_lib import build_metric_variables, fit_steps_per_execution
from tfhydra.precision.build import float32_output
from tfhydra.record.rundir import RunPaths
from tfhydra.runner.run_config import RunConfig, as_dict_config
from tfhydra.trainer.ema import ema_options
from tfhydra.trainer.objectives import build_loss, build_metrics
from tfhydra.trainer.recovery import scale_for_recovery


def build_model_and_optimizer(cfg: RunConfig, strategy, datasets, paths: RunPaths):
    """Inside the strategy's scope: the model from the data's spec, its compression, the optimizer, compiled.
    Returns (the model to train, its Compression)."""
    with strategy.scope():
        model = float32_output(build_model(cfg.model, datasets.spec))
        if starts_linear(cfg.model, datasets.spec):  # a regression's MLP starts as the linear model
            start_at_linear_fit(model, datasets.train_rows, datasets.spec.head)
        freeze_layers(model, cfg.model.get("freeze"))  # before compile, which trains what is left
        phase = Phase(
            datasets.steps_per_epoch,
            cfg.trainer.epochs,
            paths.tensorboard_compression if cfg.logging.tensorboard else None,
        )
        compression = compress_model(as_dict_config(cfg).compression, model, datasets.spec, phase, paths)
        model = compression.model
        options = {
            "clipnorm": cfg.trainer.clip_norm,
            "clipvalue": cfg.trainer.clip_value,
            "global_clipnorm": cfg.trainer.clip_global_norm,
            **ema_options(cfg.trainer.ema),
        }
        accumulate = cfg.trainer.accumulate_steps
        optimizer = build_optimizer(cfg.optimizer, datasets.steps_per_epoch, cfg.trainer.epochs, options, accumulate)
        optimizer = scale_for_recovery(optimizer, cfg.trainer.recovery)
        metrics = build_metrics(cfg.trainer.metrics, datasets.mixed_targets)
        model.compile(
            optimizer=optimizer,
            loss=build_loss(cfg.trainer.loss, cfg.trainer.label_smoothing, datasets.mixed_targets),
            metrics=metrics,
            steps_per_execution=fit_steps_per_execution(cfg.trainer.steps_per_execution, strategy),
            jit_compile=cfg.trainer.jit_compile is True,
            run_eagerly=cfg.trainer.run_eagerly,
        )
    build_metric_variables(metrics, strategy, model)
    return model, compression
