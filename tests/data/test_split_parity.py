"""The split and the digits without scikit-learn's import (issue 37, item 2: 0.6 s to several seconds before the
first step, docs/performance.md): the same examples in the same order as scikit-learn's `train_test_split` and
`load_digits`, which stay the reference here, and a run that does not import scikit-learn at all."""

import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from tfhydra.data.arrays import read_digits
from tfhydra.data.splits import stratified_shuffle_split


def label_sets():
    rng = np.random.default_rng(3)
    yield load_digits().target  # the bundled digits: 10 classes, 174-183 each
    yield np.repeat(np.arange(3), [2, 5, 40])  # a rare class: ties and tiny counts
    yield np.array(["cat", "dog"] * 50 + ["eel"] * 7)  # string labels
    for size in (20, 97, 1000):
        yield rng.integers(0, 7, size=size)  # counts that tie in every way
    yield np.tile(np.arange(4), 25)  # equal counts: every remainder ties


@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.25, 1 / 3, 0.5, 0.8])
@pytest.mark.parametrize("seed", [0, 1, 42, 2**31 - 1])
def test_the_split_is_scikit_learns_example_for_example(fraction, seed):
    compared = 0
    for labels in label_sets():
        positions = np.arange(len(labels))
        try:
            expected = train_test_split(positions, test_size=fraction, random_state=seed, stratify=labels)
        except ValueError:  # too few examples for the classes: ours refuses too
            with pytest.raises(ValueError):
                stratified_shuffle_split(labels, fraction, seed)
            continue
        kept, held = stratified_shuffle_split(labels, fraction, seed)
        assert kept.tolist() == expected[0].tolist() and held.tolist() == expected[1].tolist()
        compared += 1
    assert compared >= 5


def test_a_class_of_one_is_refused_as_scikit_learn_refuses_it():
    labels = np.array([0] * 10 + [1])
    with pytest.raises(ValueError, match="only 1 member"):
        stratified_shuffle_split(labels, 0.3, 0)


def test_the_digits_are_scikit_learns_digits():
    images, labels = read_digits()
    digits = load_digits()
    assert images.shape == (1797, 8, 8) and np.array_equal(images, digits.images)
    assert labels.tolist() == digits.target.tolist()


@pytest.mark.slow
def test_a_run_on_digits_does_not_import_scikit_learn(tmp_path):
    """A real run (one epoch) in its own process: the record is written and scikit-learn was never imported."""
    code = (
        "import sys, tfhydra\n"
        f"result = tfhydra.train(['trainer.epochs=1', 'data.batch_size=128'], run_dir={str(tmp_path / 'run')!r},"
        " quiet=True)\n"
        "print(result.status, 'sklearn' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["completed", "False"]
    data = json.loads((tmp_path / "run" / "metrics.json").read_text())["data"]
    assert (data["train_size"], data["val_size"], data["test_size"]) == (1077, 360, 360)
