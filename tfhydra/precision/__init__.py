"""Precision options: the Keras global dtype policy of a run (build.py: the registry `PRECISIONS`, the policy
scope, loss scaling).

This face names nothing, so importing the package imports no TensorFlow; the names are imported from their
module: `from tfhydra.precision.build import PRECISIONS, policy_scope, float32_output, loss_scale, warn_if_slow`.
schemas.py: the options' types (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
