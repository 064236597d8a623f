"""A regression's wide & deep MLP that starts as the linear model (`model.tabular.linear_start`, docs/tasks.md).

On a small, nearly linear table (scikit-learn's diabetes: 442 rows) a randomly started MLP ends under the linear
model that scikit-learn fits in closed form. So the MLP (seed.py `build_mlp`, `wide: true`) starts AT it: its
wide path (features -> the head, one Dense) takes the least-squares fit of the training rows, its deep output
starts at zero, and its deep kernels carry an L2 penalty (`deep_l2`, set by the builder, against the loss on
standardised targets whatever the target's units: `loss_units`), so the hidden layers move
the model away from the linear fit only as far as the training rows pay for, and the validation loss chooses the
epoch as before. Classification tasks start at random: a logistic start measured no better (docs/design.md).

The fit reads the training split once, in its stored order (`Datasets.train_rows`: after data.fraction, as the
model takes it), with the head's target statistics, and solves the normal equations with numpy; it is bounded
(`MAX_FEATURES`; the first `MAX_VALUES` values) and skipped, the model left at its random start, past the bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfhydra.config.contracts import DataSpec, Head
from tfhydra.model.auto import picked

MAX_FEATURES = 1024  # beyond: no linear start (the fit's cost grows with the features squared)
MAX_VALUES = 50_000_000  # rows x features read into the fit: the first rows up to this many values


def starts_linear(cfg_model: Any, spec: DataSpec) -> bool:
    """Whether the model built for this config and data starts at the linear fit: the MLP's keys (model=mlp's
    node, or model=auto's `tabular` when auto picks the MLP) say wide and linear_start, under a regression's
    (linear) head."""
    if "_target_" in cfg_model or spec.head is None or spec.head.activation != "linear":
        return False
    node = cfg_model
    if cfg_model.get("name") == "auto":
        node = cfg_model.get("tabular") if picked(spec)[1] == "mlp" else None
    elif cfg_model.get("name") != "mlp":
        return False
    return node is not None and bool(node.get("wide")) and bool(node.get("linear_start"))


def loss_units(spec: DataSpec) -> float:
    """What one unit of loss on standardised targets is in the loss the run computes: the loss is taken on the
    head's outputs, in the target's units (`task.standardize` scales them by `Head.scale`), so a penalty meant
    against the unit-scale loss (`deep_l2`) is multiplied by this (the mean squared scale; 1 without one)."""
    scale = spec.head.scale if spec.head is not None else None
    return float(np.mean(np.square(scale))) if scale else 1.0


def start_at_linear_fit(model, rows, head: Head | None) -> int:
    """Set the `wide` layer to the least-squares fit of the training rows (`rows`: batches of (features as the model
    takes them, targets in their units), mapped to the head's unit scale) and the deep output (`outputs`) to
    zero. The fit accumulates the normal equations batch by batch (memory: features squared), over at most
    MAX_VALUES values. Returns the rows fitted; 0 (nothing set) without rows, past MAX_FEATURES, or without the
    two layers."""
    names = {layer.name: layer for layer in model.layers}
    wide, deep = names.get("wide"), names.get("outputs")
    if rows is None or head is None or wide is None or deep is None:
        return 0
    kernel, bias = (w.shape for w in wide.get_weights())
    if kernel[0] > MAX_FEATURES:
        return 0
    gram = np.zeros((kernel[0] + 1, kernel[0] + 1))
    moments = np.zeros((kernel[0] + 1, kernel[1]))
    count, limit = 0, max(1, MAX_VALUES // kernel[0])
    for x, y in rows:
        features = np.asarray(x, dtype=np.float64).reshape(len(x), -1)[: limit - count]
        targets = np.asarray(y, dtype=np.float64).reshape(len(x), -1)[: len(features)]
        if head.scale is not None and head.offset is not None:  # the network's unit-scale targets (task.standardize)
            targets = (targets - np.asarray(head.offset)) / np.asarray(head.scale)
        design = np.concatenate([features, np.ones((len(features), 1))], axis=1)
        gram += design.T @ design
        moments += design.T @ targets
        count += len(features)
        if count >= limit:
            break
    solution = np.linalg.lstsq(gram, moments, rcond=None)[0]  # the minimum-norm fit: collinear features too
    if not count or not np.all(np.isfinite(solution)):
        return 0
    wide.set_weights([solution[:-1].reshape(kernel).astype(np.float32), solution[-1].reshape(bias).astype(np.float32)])
    deep.set_weights([np.zeros(w.shape, np.float32) for w in deep.get_weights()])
    return count
