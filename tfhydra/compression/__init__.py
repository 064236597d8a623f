"""Compression schemes: `build_x(cfg_compression, model, spec, phase) -> Compression`, one registry.

A scheme wraps the run's model with the TensorFlow Model Optimization Toolkit (tfmot) for
training, may need callbacks in both loops, and turns the trained model into the deployable
one (`strip`) before export. Rooms: plan.py (checks and phases, decided from the config alone,
no TensorFlow), schemes.py (the registry and the registered builders), toolkit.py (tfmot's API namespaces,
imported on first use), outputs.py (the fixed output layers a scheme keeps as they are), phases.py (applying the
scheme, from an earlier run's model when there is one), measure.py (figures read from the stripped weights),
checks_models.py (which scheme tfmot can apply to which built-in model, no TensorFlow).

This face names nothing, so importing the package (the run plan reads plan.py before TensorFlow is loaded)
imports no TensorFlow. The names are imported from their module: `from tfhydra.compression.schemes import
COMPRESSIONS, build_scheme`, `from tfhydra.compression.phases import compress_model`, and the types a scheme
returns, `from tfhydra.config.contracts import Compression, Phase`.
schemas.py: the options' types (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
