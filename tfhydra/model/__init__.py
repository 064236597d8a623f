"""Model builders: `build_x(cfg_model, spec) -> Keras Model`, one registry for the group.

Input shape, dtype and class count always come from the data's `DataSpec`; no builder
hard-codes them. Every builder ends with the task's head (head.py's `task_head`), float32
under mixed-precision policies. A builder checks that
the data suits it (images or token ids, large enough) before it builds anything, so a
mismatch is one ConfigError line, not a shape error deep inside Keras.

Rooms: base.py (the registry `MODELS`, the data checks), seed.py / resnet.py / sequence.py / applications.py /
hub.py (the builders, imported by `MODELS` on its first lookup), build.py (`build_model`, and `model_inputs`: what
the model takes from the data), checks.py (the options' ranges and choices, `model.weights`' pre-flight;
preset_files.py: a keras-hub preset's weights files and config sizes, read before TensorFlow), freeze.py
(`model.freeze`: which layers train), weights.py (`model.weights`: a local file loaded into the built model),
memory.py (the model's memory estimated before it is allocated), auto.py (`model=auto`: the registered model that
fits the data's kind), linear_start.py (a regression's tabular MLP started at the training rows' least-squares fit).

This face names nothing, so importing the package (the run plan reads checks.py before TensorFlow is loaded)
imports no TensorFlow. The names that need TensorFlow are imported from their module:
`from tfhydra.model.build import build_model, model_inputs`, `from tfhydra.model.base import MODELS`,
`from tfhydra.model.head import task_head`.
schemas.py: the options' types (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
head.py: `task_head(spec)`, the output layers of the run's task, and the check of a built model against
the task.
"""
