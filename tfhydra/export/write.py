"""Deployment artefacts under `<run>/export/`, one registered writer per `export.formats` entry, and their
measurements: metrics.json's `compression` section.

Each writer builds into a temporary sibling and renames it into place, so an export directory that exists is
complete. Every figure is read back from what was written (measure.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tfhydra.config.contracts import Compression
from tfhydra.config.errors import ConfigError, clip, first_line
from tfhydra.export.base import EXPORT_FORMATS, Deployment
from tfhydra.export.measure import accuracy, keras_predict, measure_artefacts
from tfhydra.export.savedmodel import serving_layout
from tfhydra.export.schemas import ExportConfig
from tfhydra.platform.keras_lib import keras
from tfhydra.record.rundir import RunPaths


def export_model(
    cfg_export: ExportConfig, compression: Compression, trained: keras.Model, datasets, run_dir: Path
) -> tuple[dict[str, str], dict]:
    """Strip, write every format, measure: ({format: path in the run dir}, metrics.json's `compression` section)."""
    paths = RunPaths(run_dir)
    deployable = compression.strip(trained)
    deployment = Deployment(
        deployable,
        lambda: compression.float_twin(deployable),
        compression.quantization_aware,
        cfg_export.tflite,
        datasets.train,
        getattr(datasets, "serving", None),
        datasets.spec.head.signature if datasets.spec.head is not None else "output_0",  # None: built without a task
    )
    written = {}
    for name in cfg_export.formats:
        target = paths.export_format(name)
        partial = target.with_name(f".{name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        write_format(name, deployment, partial, list(cfg_export.formats))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        written[name] = paths.relative(target)
    if "saved_model" in written:
        serving_layout(paths)
    test = getattr(datasets, "test", None)  # measured after training, on the kept model: nothing chooses on it
    predict = keras_predict(deployable)
    head = getattr(datasets.spec, "head", None)  # what the outputs are (tfhydra/task/): which accuracy, if any
    figures = {
        "scheme": compression.scheme,
        **compression.measure(deployable),
        "keras_val_accuracy": accuracy(predict, datasets.validation, head),
        **({"keras_test_accuracy": accuracy(predict, test, head)} if test is not None else {}),
    }
    figures.update(measure_artefacts(paths, written, datasets.validation, cfg_export.tflite, compression, test, head))
    return written, figures


def write_format(name: str, deployment: Deployment, path: Path, formats: list[str]) -> None:
    """One writer; a converter that refuses the model is one line naming the format (the trained model is kept,
    so the run can be finished without that format). A full disk stays an OSError: the job reports it as such."""
    try:
        EXPORT_FORMATS.get(name)(deployment, path)
    except (OSError, ConfigError, KeyboardInterrupt):
        shutil.rmtree(path, ignore_errors=True)
        raise
    except Exception as error:
        shutil.rmtree(path, ignore_errors=True)
        reason = re.sub(
            r"^\S+:\d+:\d+: error: ", "", first_line(error)
        )  # the converter's "<file>:<line>:<col>: error: "
        others = [f for f in formats if f != name]
        raise ConfigError(
            "export.formats",
            name,
            f"export.formats=[{','.join(others)}] (the trained model is kept: "
            "the same command with that override finishes the run)",
            f"the {name} export failed ({type(error).__name__}: {clip(reason, 200)})",
        ) from error
