"""Deployment artefacts under `<run>/export/`, one registered writer per `export.formats` entry.

Each writer builds into a temporary sibling and renames it into place, so an export
directory that exists is complete.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import tf_keras as keras

from tfhydra.registry import Registry

EXPORT_FORMATS = Registry("export.formats")


def export_model(formats, model: keras.Model, run_dir: Path) -> dict[str, str]:
    """Write every requested format; returns {format: path relative to the run dir}."""
    written = {}
    for name in formats:
        target = run_dir / "export" / name
        partial = target.with_name(f".{name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        EXPORT_FORMATS.get(name)(model, partial)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        written[name] = str(target.relative_to(run_dir))
    return written


@EXPORT_FORMATS.register("saved_model")
def write_saved_model(model: keras.Model, path: Path) -> None:
    """Inference-only SavedModel; its `serve` endpoint / `serving_default` signature predicts."""
    interactive = keras.utils.is_interactive_logging_enabled()
    keras.utils.disable_interactive_logging()  # export prints every endpoint; send that to the log instead
    try:
        model.export(str(path))
    finally:
        if interactive:
            keras.utils.enable_interactive_logging()
