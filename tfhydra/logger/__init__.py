"""Experiment trackers, selected by the `logger` group (conf/logger/): several at once, `logger=[tensorboard,mlflow]`.

TensorBoard stays a Keras callback of the trainer room (its keys live in `logging:`); this room holds the
trackers that keep a run of their own beside tfhydra's: MLflow, Weights & Biases, CSV. A tracker is a side
channel: whatever fails in it (a server down, a full disk) is said once in train.log and the run goes on
without it (trackers.py). A run's tracker runs are kept in `<run>/trackers.json`, so a resumed run continues
them instead of starting new ones.

Rooms: checks.py (what the run plan checks, no TensorFlow), trackers.py (the tracker type, the registry `LOGGERS`,
CSV), mlflow_run.py and wandb_run.py (imported by `LOGGERS` on its first lookup; they import mlflow and wandb only
when a tracker starts: both are optional extras), callback.py (the Keras callback that hands each epoch over),
start.py (starts the trackers the `logger` list selects). This package's import stays TensorFlow-free, and names
nothing: the run plan reads checks.py, the job imports start.py and callback.py.
schemas.py: the `logging:` section's and the logger options' types (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
