"""Distribution strategy builders: `build_x(cfg_strategy) -> tf.distribute.Strategy`.

Rooms: checks.py (what the run plan checks, no TensorFlow), build.py (the registry and builders).

This face names nothing, so importing the package imports no TensorFlow; the names are imported from their
module: `from tfhydra.strategy.build import STRATEGIES, build_strategy, describe_devices, is_chief, shard,
read_tf_config`.
schemas.py: the options' types (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
