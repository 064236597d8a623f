"""The export room: deployment artefacts (`export.formats`) and their measurements.

Rooms: checks.py (what the run plan checks in the export section, no TensorFlow; the format names), base.py
(the writers' registry), savedmodel.py, tflite.py, onnx.py (the writers and their runtimes), measure.py (the
figures read back from the files), write.py (`export_model`: strip, write, measure), served.py (a finished run's export
run again: the SavedModel, loaded with the TensorFlow Text ops a keras-hub tokenizer needs, else its TFLite file
through LiteRT, for tfhydra-predict and tfhydra-evaluate). This
package's import stays TensorFlow-free so the run plan can read checks.py; `export_model` is looked up on first use
(PEP 562).
schemas.py: the `export:` section's type (dataclasses, named by conf/'s YAML; docs/design.md "Typed configs").
"""

from __future__ import annotations

import importlib

_LAZY = {"export_model": "tfhydra.export.write", "EXPORT_FORMATS": "tfhydra.export.base"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


__all__ = sorted(_LAZY)
