"""Would averaging several table MLPs close the gap to the linear model on diabetes and breast cancer (issue 55)?

    python benchmarks/tabular_ensembles.py [--tables diabetes breast_cancer] [--seeds 0 1 2 3 4] [--members 5]
                                           [--contenders single seeds bag linear_start]

A question asked before building anything: tfhydra's tables' defaults stay under scikit-learn's standardised linear
model on diabetes (R²) and breast cancer (AUC), and the two usual cures for a small table's variance are averages
of models. This script measures them outside tfhydra, in plain tf_keras, on the benchmark's own rows
(task_baselines.py: the same test split per seed, tfhydra's training and validation rows):
  single   the tables' defaults as tfhydra builds them: features (and a regression's targets) standardised on the
           training rows, wide & deep [128, 64] ReLU with dropout 0.3 after the first layer, Adam 1e-3, batch 32,
           at most 200 epochs, early stopping on the validation loss (patience 20) keeping the best epoch
  seeds    `--members` such models on the same training and validation rows, other seeds, outputs averaged
  bag      k-fold bagging (AutoGluon's default for tables): the non-test rows cut into `--members` folds, model i
           validating on fold i and training on the rest (so every non-test row trains), outputs averaged
  linear_start  one model started at the linear model fit on its training rows (the wide path: least squares for a
           regression, scikit-learn's LogisticRegression for a binary task), the deep output at zero, L2 1e-3 on
           the deep kernels: round seven's question (docs/design.md), asked here of breast cancer's binary task,
           which tfhydra's `linear_start` (regression only) does not cover
The single model reproduces tfhydra's figures within the seeds' spread (docs/design.md, round six), so the
replica answers for tfhydra. Output: each table's median test figure over the seeds, per seed, and the linear
model's (fit on every non-test row, as task_baselines.py's report).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import task_baselines  # noqa: E402  (after the path: the benchmark's tables, splits and baselines)


def fit_member(x, y, train, val, task: str, seed: int, linear_start: bool = False):
    """One tables' MLP trained on `train`, stopped on `val`; a function of features to its outputs."""
    import tf_keras as keras

    mean, std = x[train].mean(0), x[train].std(0) + 1e-12
    shift, scale = (y[train].mean(), y[train].std()) if task == "regression" else (0.0, 1.0)
    keras.utils.set_random_seed(seed)
    penalty = keras.regularizers.L2(1e-3) if linear_start else None
    inputs = keras.Input((x.shape[1],))
    deep = keras.layers.Dropout(0.3)(keras.layers.Dense(128, activation="relu", kernel_regularizer=penalty)(inputs))
    deep = keras.layers.Dense(64, activation="relu", kernel_regularizer=penalty)(deep)
    deep_output = keras.layers.Dense(1, kernel_regularizer=penalty)
    wide = keras.layers.Dense(1)
    output = keras.layers.Add()([deep_output(deep), wide(inputs)])  # the wide path
    if task == "binary":
        output = keras.layers.Activation("sigmoid")(output)
    model = keras.Model(inputs, output)
    if linear_start:
        wide.set_weights(linear_fit((x[train] - mean) / std, (y[train] - shift) / scale, task))
        deep_output.set_weights([np.zeros_like(w) for w in deep_output.get_weights()])
    model.compile(keras.optimizers.Adam(1e-3), "mse" if task == "regression" else "binary_crossentropy")
    model.fit(
        (x[train] - mean) / std,
        (y[train] - shift) / scale,
        validation_data=((x[val] - mean) / std, (y[val] - shift) / scale),
        epochs=200,
        batch_size=32,
        verbose=0,
        callbacks=[keras.callbacks.EarlyStopping(patience=20, restore_best_weights=True)],
    )
    return lambda rows: model((x[rows] - mean) / std, training=False).numpy()[:, 0] * scale + shift


def linear_fit(features, targets, task: str) -> list:
    """The wide path's (kernel, bias): least squares (a regression), scikit-learn's LogisticRegression (binary)."""
    if task == "regression":
        design = np.column_stack([features, np.ones(len(features))])
        solution = np.linalg.lstsq(design, targets, rcond=None)[0]
        return [solution[:-1, None].astype("float32"), solution[-1:].astype("float32")]
    from sklearn.linear_model import LogisticRegression

    fitted = LogisticRegression(max_iter=1000).fit(features, targets)
    return [fitted.coef_.T.astype("float32"), fitted.intercept_.astype("float32")]


def figure(task: str, truth, outputs) -> float:
    """R² (a regression) or the exact AUC (binary) of `outputs` against `truth`."""
    from sklearn.metrics import r2_score, roc_auc_score

    return float((r2_score if task == "regression" else roc_auc_score)(truth, outputs))


def test_figure(table, seed: int, contender: str, members: int) -> tuple[float | None, float]:
    """(the validation figure of a one-model contender, else None; the test figure)."""
    split = task_baselines.held_out(table, seed)
    x, y = table.x.astype("float64"), table.y.astype("float64")
    if contender in ("single", "linear_start"):
        pairs = [(split.train, split.validation)]
    elif contender == "seeds":
        pairs = [(split.train, split.validation)] * members
    else:
        rest = np.random.default_rng(seed).permutation(np.concatenate([split.train, split.validation]))
        folds = np.array_split(rest, members)
        pairs = [(np.concatenate(folds[:i] + folds[i + 1 :]), fold) for i, fold in enumerate(folds)]
    members_ = [
        fit_member(x, y, train, val, table.task, seed * 100 + i, contender == "linear_start")
        for i, (train, val) in enumerate(pairs)
    ]
    test = figure(table.task, y[split.test], np.mean([m(split.test) for m in members_], axis=0))
    one = len(members_) == 1
    return (figure(table.task, y[split.validation], members_[0](split.validation)) if one else None), test


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tables", nargs="+", default=["diabetes", "breast_cancer"], choices=["diabetes", "breast_cancer", "friedman1"]
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--members", type=int, default=5)
    choices = ["single", "seeds", "bag", "linear_start"]
    parser.add_argument("--contenders", nargs="+", default=choices[:3], choices=choices)
    args = parser.parse_args()
    for table in task_baselines.tables(args.tables):
        linear = [task_baselines.baselines(table, task_baselines.test_rows(table, s), s)["linear"] for s in args.seeds]
        print(
            f"{table.name} linear: median {statistics.median(linear):.4f} {[round(v, 4) for v in linear]}", flush=True
        )
        for contender in args.contenders:
            pairs = [test_figure(table, s, contender, args.members) for s in args.seeds]
            figures, checks = [t for _, t in pairs], [v for v, _ in pairs if v is not None]
            said = f"; validation median {statistics.median(checks):.4f}" if checks else ""
            print(
                f"{table.name} {contender}: median {statistics.median(figures):.4f} {[round(v, 4) for v in figures]}"
                + said,
                flush=True,
            )


if __name__ == "__main__":
    main()
