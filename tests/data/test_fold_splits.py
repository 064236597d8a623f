"""k-fold (issue 59, item 4; docs/sweeps.md "k-fold"): the split function itself, in milliseconds. What the test
split leaves is cut into K disjoint, stratified folds from `data.split_seed`; fold i validates; the test split is
the one a run without folds holds out."""

import numpy as np
import pytest
from omegaconf import OmegaConf

from tfhydra.config.errors import ConfigError
from tfhydra.data.splits import fold_assignment, hold_out, training_share

LABELS = np.repeat(np.arange(10), [178, 182, 177, 183, 181, 182, 181, 179, 174, 180])  # digits' class counts
np.random.default_rng(0).shuffle(LABELS)


def data_cfg(**keys):
    return OmegaConf.create({"val_fraction": 0.2, "test_fraction": 0.2, "split_seed": 0, **keys})


@pytest.mark.parametrize("folds", [2, 5, 7])
def test_the_folds_are_disjoint_cover_what_test_leaves_and_are_stratified_within_one(folds):
    plain = hold_out(LABELS, data_cfg(), seed=0)
    held = [hold_out(LABELS, data_cfg(folds=folds, fold=i), seed=0) for i in range(folds)]
    for one in held:  # the test split is the one a run without folds has, in every fold
        assert np.array_equal(one.test, plain.test)
        assert not set(one.validation) & set(one.test) and not set(one.train) & set(one.test)
        assert np.array_equal(
            np.sort(np.concatenate([one.train, one.validation])),
            np.sort(np.concatenate([plain.train, plain.validation])),
        )
    validations = np.concatenate([h.validation for h in held])
    assert len(validations) == len(set(validations)) == len(LABELS) - len(plain.test)  # disjoint, covering
    sizes = [len(h.validation) for h in held]
    assert max(sizes) - min(sizes) <= 1
    for label in range(10):  # each class's share of every fold, within one example
        per_fold = [int(np.sum(LABELS[h.validation] == label)) for h in held]
        assert max(per_fold) - min(per_fold) <= 1, (label, per_fold)
    again = hold_out(LABELS, data_cfg(folds=folds, fold=1), seed=0)
    assert np.array_equal(again.validation, held[1].validation)  # deterministic
    other_seed = hold_out(LABELS, data_cfg(folds=folds, fold=1), seed=9)  # trainer.seed moves nothing ...
    assert np.array_equal(other_seed.validation, held[1].validation)
    moved = hold_out(LABELS, data_cfg(folds=folds, fold=1, split_seed=1), seed=0)  # ... data.split_seed does
    assert not np.array_equal(moved.validation, held[1].validation) and np.array_equal(
        hold_out(LABELS, data_cfg(split_seed=1), seed=0).test, moved.test
    )


def test_a_shipped_test_split_and_no_strata_still_fold_everything_once():
    held = [hold_out(LABELS[:100], data_cfg(folds=3, fold=i), seed=0, ships_test=True) for i in range(3)]
    assert sorted(np.concatenate([h.validation for h in held]).tolist()) == list(range(100))
    assert [len(h.validation) for h in held] == [34, 33, 33] and all(len(h.test) == 0 for h in held)
    shuffled = fold_assignment(None, 10, 4, seed=0)  # regression without task.strata_bins: a seeded shuffle
    assert sorted(np.bincount(shuffled).tolist()) == [2, 2, 3, 3]
    assert training_share(data_cfg(folds=4)) == pytest.approx(0.8 * 0.75)


def test_more_folds_than_the_smallest_class_allows_and_a_shipped_validation_are_one_line():
    labels = np.repeat(np.arange(3), [30, 30, 5])  # class 2: 4 left once the test split took its share
    with pytest.raises(ConfigError, match=r"data.folds=5: class 2 has 4 examples outside the test split.*\[2, 4\]"):
        hold_out(labels, data_cfg(folds=5, fold=0), seed=0)
    with pytest.raises(ConfigError, match="data.folds=3: there is nothing to fold; accepted: null: this source ships"):
        hold_out(labels, data_cfg(folds=3, fold=0), seed=0, ships_validation=True)


def test_a_validation_share_too_small_for_the_classes_names_the_share_as_written():
    """Validation is a share of all the examples, rescaled to what the test split left (0.1 of 20 is 0.125 of 16);
    the line names the 0.1 the user wrote (a 20-row, 3-class table under the tables' `data.val_fraction: 0.1`)."""
    labels = np.array([0, 1, 2] * 6 + [0, 1])
    with pytest.raises(ConfigError) as caught:
        hold_out(labels, data_cfg(val_fraction=0.1), seed=0)
    assert str(caught.value).startswith("data.val_fraction=0.1: cannot split 16 examples"), str(caught.value)
