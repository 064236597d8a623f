"""The SavedModel (serving the data as stored) and the tf_keras `.keras` file."""

from __future__ import annotations

import warnings
from pathlib import Path

import tensorflow as tf

from tfhydra.export.base import EXPORT_FORMATS, Deployment
from tfhydra.platform.keras_lib import keras
from tfhydra.record.rundir import RunPaths


@EXPORT_FORMATS.register("saved_model")
def write_saved_model(deployment: Deployment, path: Path) -> None:
    """Inference-only SavedModel that takes the data as the source stores them.

    Endpoints (and signatures of the same names): `serve_raw` takes raw examples (uint8 images at their stored
    size, raw CSV feature columns, strings) and runs the source's preprocessing (the fitted Normalization or
    TextVectorization layer is saved with it) before the model; `serve` takes the model's inputs, as the
    training pipeline feeds them. `serving_default`, what TF Serving and `saved_model_cli` call by default, is
    `serve_raw` when the source can describe its raw data, else `serve` (docs/deploy.md)."""
    model, serving = deployment.model, deployment.serving
    archive = keras.export.ExportArchive()
    archive.track(model)
    features = [tf.TensorSpec([None, *model.inputs[0].shape[1:]], model.inputs[0].dtype, name="inputs")]
    if serving is not None:
        for layer in serving.layers:
            archive.track(layer)
        raw = tf.TensorSpec([None, *serving.raw.shape], serving.raw.dtype, name="inputs")

        def serve_raw(inputs):
            return model(serving.prepare(inputs), training=False)

        archive.add_endpoint("serve_raw", serve_raw, [raw])  # the first endpoint: also `serving_default`
    archive.add_endpoint("serve", lambda inputs: model(inputs, training=False), features)
    interactive = keras.utils.is_interactive_logging_enabled()
    keras.utils.disable_interactive_logging()  # export prints every endpoint; send that to the log instead
    try:
        archive.write_out(str(path))
    finally:
        if interactive:
            keras.utils.enable_interactive_logging()


def serving_layout(paths: RunPaths) -> None:
    """`export/serving/1/`, the layout TF Serving polls (`--model_base_path=<run>/export/serving`): version 1 is
    the run's SavedModel, linked (relative, inside the run directory) rather than written twice."""
    version = paths.serving / "1"
    version.parent.mkdir(parents=True, exist_ok=True)
    if version.is_symlink() or version.exists():
        version.unlink()
    version.symlink_to(Path("..") / paths.saved_model.name, target_is_directory=True)


@EXPORT_FORMATS.register("keras")
def write_keras(deployment: Deployment, path: Path) -> None:
    """`model.keras`, the tf_keras file; a quantization-aware model as `model.h5`, which loads inside
    `tfmot.quantization.keras.quantize_scope()` (tf_keras 2.21 cannot reload tfmot's QuantizeLayer
    from a `.keras` file: it expects 5 variables and finds 3)."""
    path.mkdir(parents=True)
    with warnings.catch_warnings():  # "HDF5 is a legacy format": chosen on purpose, see above
        warnings.simplefilter("ignore")
        deployment.model.save(str(path / ("model.h5" if deployment.quantization_aware else "model.keras")))
