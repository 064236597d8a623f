"""Evaluate a finished run's exported model on a dataset, without retraining.

    python -m tfhydra.evaluate <run_dir> [data=<source> data.<key>=<value> ...]

The run's own overrides (`.hydra/overrides.yaml`) are composed again from the config
directory the run was made with, followed by the new ones; with none it evaluates on the
run's own validation split. The exported SavedModel is loaded as a SavedModel (no Python
code from the run directory is executed), wrapped, and compiled with the run's loss and
metrics, so the figures mean what they meant during training. The result is printed as
one JSON line and written to `<run_dir>/evaluations/`.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import tfhydra  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)
from tfhydra.errors import ConfigError

USAGE = "usage: python -m tfhydra.evaluate RUN_DIR [data=<source>] [data.<key>=<value> ...]"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    try:
        result = evaluate_run(Path(argv[0]), argv[1:])
    except ConfigError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


def load_run_config(run_dir: Path, overrides: list[str]):
    """The run's config with `overrides` applied, composed and validated like a new command line."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from tfhydra.cli import check_overrides

    metrics, hydra_file = run_dir / "metrics.json", run_dir / ".hydra" / "hydra.yaml"
    status = json.loads(metrics.read_text()).get("status") if metrics.is_file() else None
    if status != "completed" or not (run_dir / "export" / "saved_model").is_dir() or not hydra_file.is_file():
        raise ConfigError(str(run_dir), None, "the directory of a completed run with export/saved_model and .hydra/",
                          f"not a completed run (status: {status})")
    sources = OmegaConf.load(hydra_file).hydra.runtime.config_sources
    config_dir = next((s.path for s in sources if s.provider == "main"), None)
    config_name = OmegaConf.load(hydra_file).hydra.job.config_name
    if not config_dir or not Path(config_dir).is_dir():
        raise ConfigError(str(hydra_file), None, "a run whose config directory still exists",
                          f"its config directory {config_dir} is gone")
    every = list(OmegaConf.load(run_dir / ".hydra" / "overrides.yaml")) + list(overrides)
    check_overrides(config_dir, config_name, every)
    with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
        return compose(config_name=config_name, overrides=every)


def _served_model_layer():
    import tf_keras as keras

    class ServedModel(keras.layers.Layer):
        """A loaded SavedModel's `serve` endpoint as a Keras layer, so Keras metrics can evaluate it."""

        def __init__(self, served, **kwargs):
            super().__init__(trainable=False, **kwargs)
            self.served = served

        def call(self, inputs):
            return self.served.serve(inputs)

    return ServedModel


def evaluate_run(run_dir: Path, overrides: list[str]) -> dict:
    import tensorflow as tf
    import tf_keras as keras

    from tfhydra.data import build_datasets
    from tfhydra.report import write_json
    from tfhydra.trainer.objectives import build_loss, build_metrics

    ServedModel = _served_model_layer()
    cfg = load_run_config(run_dir, overrides)
    datasets = build_datasets(cfg.data, cfg.trainer.seed)
    served = tf.saved_model.load(str(run_dir / "export" / "saved_model"))
    signature = served.signatures["serving_default"]
    expected = tuple(signature.structured_input_signature[1].values())[0]
    spec = datasets.spec
    if tuple(expected.shape[1:]) != tuple(spec.input_shape):
        raise ConfigError("data", cfg.data.get("name"), f"data whose examples have shape {tuple(expected.shape[1:])}",
                          f"its examples have shape {tuple(spec.input_shape)}, which the run's model does not take")
    classes = tuple(signature.structured_outputs.values())[0].shape[-1]
    if classes != spec.num_classes:
        raise ConfigError("data", cfg.data.get("name"), f"data with {classes} classes",
                          f"it has {spec.num_classes} classes, the run's model predicts {classes}")

    inputs = keras.Input(spec.input_shape, dtype=expected.dtype)
    model = keras.Model(inputs, ServedModel(served)(inputs))
    model.compile(loss=build_loss(cfg.trainer.loss), metrics=build_metrics(cfg.trainer.metrics))
    started = time.perf_counter()
    figures = model.evaluate(datasets.validation, verbose=0, return_dict=True)
    result = {"run_dir": str(run_dir), "overrides": list(overrides), "data": cfg.data.get("name"),
              "examples": spec.val_size, "metrics": {k: float(v) for k, v in figures.items()},
              "seconds": time.perf_counter() - started}
    out = run_dir / "evaluations" / f"{cfg.data.get('name')}_{time.strftime('%Y%m%d-%H%M%S')}_{time.time_ns() % 10**6:06d}.json"
    out.parent.mkdir(exist_ok=True)
    write_json(out, result)
    result["written_to"] = str(out)
    return result


if __name__ == "__main__":
    sys.exit(main())
