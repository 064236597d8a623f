"""Three splits for every source: training, validation (every choice: best epoch, early stopping, ranking,
promotion, pruners) and test (measured once, on the weights that are kept; nothing that chooses sees it).

A source that ships a test split keeps it as the test split (Keras datasets, npz `x_test`, TFRecord `data.test`,
image_folder `test/`, TFDS `data.test_split`) and holds validation out of its training split, unless it ships
a validation split too. A source with one split holds out `data.test_fraction` and `data.val_fraction` of all its
examples. Both hold-outs are stratified and seeded by `data.split_seed`, not `trainer.seed`: every job of a
sweep and every seed is validated and tested on the same examples (`data.split_seed=null` follows trainer.seed).
`data.test_fraction=0` turns the test split off, for every source.

k-fold (`data.folds=K data.fold=i`, drawn by `sweep.folds=K`: docs/sweeps.md): where validation is held out here,
the examples the test split left are cut into K stratified folds, seeded by `data.split_seed`; fold i validates
and the other K - 1 train. The test split is taken first, as always, so it is the same in every fold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tfhydra.config.errors import ConfigError


@dataclass(frozen=True)
class HeldOut:
    """Sorted indices into the examples a source split: training, validation and test (empty when not held out
    here: the source ships that split, or the test split is off)."""

    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray


def wants_test(cfg) -> bool:
    """The test split is on (`data.test_fraction` > 0): sources that ship one read it only then."""
    return float(cfg.get("test_fraction") or 0) > 0


def split_seed(cfg, seed: int) -> int:
    """`data.split_seed`, or the run's seed when it is null."""
    value = cfg.get("split_seed")
    return seed if value is None else int(value)


def hold_out(labels: np.ndarray, cfg, seed: int, ships_validation: bool = False, ships_test: bool = False) -> HeldOut:
    """Split `labels`' examples into what the source does not ship.

    One split (ships neither): test is `data.test_fraction` and validation `data.val_fraction` of all the
    examples. A shipped test split: validation is `data.val_fraction` of these (the training split's) examples.
    Test is taken first, so changing `data.val_fraction` never moves an example into or out of the test split.
    """
    from tfhydra.data.labels import strata

    count = len(labels)
    grouped = strata(labels)  # the task's strata; None (e.g. regression): plain seeded shuffles
    rest, seed = np.arange(count), split_seed(cfg, seed)
    test = np.array([], dtype=np.int64)
    if not ships_test and wants_test(cfg):
        rest, test = _split(grouped, rest, float(cfg.test_fraction), seed, "data.test_fraction")
    validation = np.array([], dtype=np.int64)
    folds = cfg.get("folds")
    if folds is not None:
        if ships_validation:  # the pre-flight refuses the sources it can tell (tfhydra/data/checks.py)
            raise ConfigError(
                "data.folds", folds, "null: this source ships its own validation split", "there is nothing to fold"
            )
        kept, held = fold_split(grouped, rest, int(folds), int(cfg.get("fold") or 0), seed)
        return HeldOut(np.sort(kept), np.sort(held), np.sort(test))
    if not ships_validation:
        share = float(cfg.val_fraction)
        if not ships_test and wants_test(cfg):  # a share of all the examples, not of what test left
            share = share / (1.0 - float(cfg.test_fraction))
        rest, validation = _split(grouped, rest, share, seed, "data.val_fraction", float(cfg.val_fraction))
    return HeldOut(np.sort(rest), np.sort(validation), np.sort(test))


def training_share(cfg, ships_validation: bool = False, ships_test: bool = False) -> float:
    """The share of a source's (training) examples `hold_out` leaves to train on: all of them less the test and
    validation shares it holds out (a shipped split holds out nothing here)."""
    test = float(cfg.test_fraction) if not ships_test and wants_test(cfg) else 0.0
    if ships_validation:
        return 1.0 - test
    if cfg.get("folds") is not None:  # k-fold: one fold of what the test split left validates
        return (1.0 - test) * (1.0 - 1.0 / int(cfg.folds))
    if ships_test or not wants_test(cfg):  # validation is a share of the training split
        return 1.0 - float(cfg.val_fraction)
    return 1.0 - test - float(cfg.val_fraction)  # both shares of all the examples


def _split(labels: np.ndarray | None, among: np.ndarray, fraction: float, seed: int, key: str, given=None):
    """(kept, held out) indices from `among`, every class in both (`labels` None: a seeded shuffle); a refusal
    names `given`, the share as the user wrote it (validation is a share of all the examples, rescaled here to
    what the test split left)."""
    said = fraction if given is None else given
    if not 0 < fraction < 1:
        raise ConfigError(key, said, "data.val_fraction + data.test_fraction below 1", "it leaves no training examples")
    if labels is None:
        kept, held = shuffle_split(len(among), fraction, seed)
        if not len(kept) or not len(held):
            raise ConfigError(key, said, "a fraction leaving examples in every split", f"{len(among)} examples")
        return among[kept], among[held]
    try:
        kept, held = stratified_shuffle_split(labels[among], fraction, seed)
        return among[kept], among[held]
    except ValueError as error:
        raise ConfigError(
            key,
            said,
            "a fraction leaving every class in every split",
            f"cannot split {len(among)} examples ({error})",
        ) from None


def fold_assignment(labels: np.ndarray | None, count: int, folds: int, seed: int) -> np.ndarray:
    """The fold (0..folds-1) of each of `count` examples: a seeded shuffle within each stratum (`labels`, the task's
    strata; None: one stratum), then dealt out in turn, class after class, so every fold holds each class's share
    within one example and the folds' sizes differ by one at most (as scikit-learn's StratifiedKFold promises)."""
    rng = np.random.RandomState(seed)
    order = rng.permutation(count)
    if labels is not None:
        _, positions = np.unique(np.asarray(labels), return_inverse=True)
        order = order[np.argsort(positions.reshape(-1)[order], kind="stable")]  # by class, shuffled within
    assigned = np.empty(count, dtype=np.int64)
    assigned[order] = np.arange(count) % folds
    return assigned


def fold_split(labels: np.ndarray | None, among: np.ndarray, folds: int, fold: int, seed: int):
    """(kept, held out) indices from `among`: fold `fold` of `folds` held out (fold_assignment), refused in one line
    when a class has fewer examples than folds (a fold would validate without it)."""
    strata_among = None if labels is None else np.asarray(labels)[among]
    if strata_among is not None:
        classes, counts = np.unique(strata_among, return_counts=True)
        if counts.min() < folds:
            smallest = classes[counts.argmin()]
            fewest = int(counts.min())
            raise ConfigError(
                "data.folds",
                folds,
                f"an integer in [2, {fewest}]" if fewest >= 2 else "null (no k-fold)",
                f"class {smallest} has {fewest} example{'s' * (fewest != 1)} outside the test split: "
                "a fold would hold none of it",
            )
    elif len(among) < folds:
        raise ConfigError("data.folds", folds, f"an integer in [2, {len(among)}]", f"{len(among)} examples to fold")
    assigned = fold_assignment(strata_among, len(among), folds, seed)
    return among[assigned != fold], among[assigned == fold]


def stratified_shuffle_split(labels: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (kept, held out) into `labels`, `fraction` of them held out, every class in both: the very
    split (and order) of scikit-learn's `train_test_split(..., test_size=fraction, random_state=seed,
    stratify=labels)`, so a run's splits are what they were, without importing scikit-learn (0.6 s to several
    seconds, before the first step: docs/performance.md). tests/data/test_split_parity.py holds it to it."""
    labels = np.asarray(labels)
    n_held = int(np.ceil(fraction * len(labels)))
    n_kept = len(labels) - n_held
    classes, positions, counts = np.unique(labels, return_inverse=True, return_counts=True)
    if counts.min() < 2:
        single = classes[counts < 2].tolist()  # a few, never the whole list (500 of them for a numeric target)
        shown = ", ".join(map(str, single[:3])) + (f" and {len(single) - 3} more" if len(single) > 3 else "")
        raise ValueError(f"{len(single)} of the {len(classes)} classes have only 1 member: {shown}")
    if n_kept == 0 or n_kept < len(classes) or n_held < len(classes):
        raise ValueError(f"{n_kept} kept and {n_held} held out for {len(classes)} classes")
    by_class = np.split(np.argsort(positions.reshape(-1), kind="stable"), np.cumsum(counts)[:-1])
    rng = np.random.RandomState(seed)
    kept_per_class = _approximate_mode(counts, n_kept, rng)
    held_per_class = _approximate_mode(counts - kept_per_class, n_held, rng)
    kept: list = []  # example indices, class by class
    held: list = []
    for members, n_k, n_h in zip(by_class, kept_per_class, held_per_class, strict=True):
        shuffled = members.take(rng.permutation(len(members)), mode="clip")
        kept.extend(shuffled[:n_k])
        held.extend(shuffled[n_k : n_k + n_h])
    return rng.permutation(kept), rng.permutation(held)


def shuffle_split(count: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (kept, held out) of `count` examples, `fraction` held out (rounded up, as the stratified split
    does), drawn by a seeded permutation: the split of tasks without classes to stratify by (regression)."""
    order = np.random.RandomState(seed).permutation(count)
    n_held = int(np.ceil(fraction * count))
    return order[n_held:], order[:n_held]


def _approximate_mode(counts: np.ndarray, draws: int, rng: np.random.RandomState) -> np.ndarray:
    """How many of `draws` each class gets: its share rounded down, the rest to the largest remainders, ties
    broken by `rng` (scikit-learn's `_approximate_mode`, draw for draw)."""
    continuous = counts / counts.sum() * draws
    floored = np.floor(continuous)
    need = int(draws - floored.sum())
    if need > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (tied,) = np.where(remainder == value)
            now = min(len(tied), need)
            floored[rng.choice(tied, size=now, replace=False)] += 1
            need -= now
            if need == 0:
                break
    return floored.astype(int)


def sizes(train: int, validation: int, test: int) -> str:
    """The three split sizes, as the log says them."""
    return (
        f"{train} train / {validation} validation / {test} test examples"
        if test
        else f"{train} train / {validation} validation examples (no test split)"
    )
