"""The export room: deployment artefacts (`export.formats`) and their measurements.

Rooms: checks.py (what the run plan checks in the export section, no TensorFlow; the format names), base.py
(the writers' registry `EXPORT_FORMATS`, which imports the writers on its first lookup), savedmodel.py, tflite.py,
onnx.py (the writers and their runtimes), measure.py (the figures read back from the files), write.py
(`export_model`: strip, write, measure), served.py (a finished run's export run again: the SavedModel, loaded with
the TensorFlow Text ops a keras-hub tokenizer needs, else its TFLite file through LiteRT, for tfhydra-predict and
tfhydra-evaluate), card.py (`export/README.md`, the model card written from the record; `tfhydra-predict RUN_DIR
--info` prints it).

This face names nothing, so importing the package (the run plan reads checks.py) imports no TensorFlow:
`from tfhydra.export.write import export_model`, `from tfhydra.export.base import EXPORT_FORMATS`.
schemas.py: the `export:` section's type (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
