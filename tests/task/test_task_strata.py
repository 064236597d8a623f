"""`task.strata_bins` (regression): the splits stratified by quantile bins of the first target, so every split spans
the target's range in proportion; null (the default) keeps today's seeded shuffles; a bad value is one line."""

import csv

import numpy as np
import pytest
from conftest import CONFIG_DIR

from tfhydra.cli.preflight import check_overrides
from tfhydra.config.errors import ConfigError
from tfhydra.task.regression import Regression

BINS = 5


def skewed_csv(path, rows: int = 500) -> np.ndarray:
    """A long-tailed (log-normal) target: a seeded shuffle easily leaves a small split short of the tail."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(rows, 2)), rng.lognormal(size=rows)
    with open(path, "w", newline="") as file:
        table = csv.writer(file)
        table.writerow(["a", "b", "price"])
        table.writerows([[f"{v:.9g}" for v in row] for row in np.column_stack([x, y])])
    return np.loadtxt(path, delimiter=",", skiprows=1, usecols=2, dtype=np.float32)  # as the source reads it


def test_the_strata_are_quantile_bins_of_the_first_target():
    targets = np.column_stack([np.arange(100.0)[::-1], np.zeros(100)])  # the second target is ignored
    strata = Regression(strata_bins=4).strata(targets)
    assert np.bincount(strata).tolist() == [25, 25, 25, 25]
    assert strata[0] == 3 and strata[-1] == 0  # the largest first target is in the top bin
    assert Regression().strata(targets) is None  # the default: seeded shuffles
    tied = Regression(strata_bins=4).strata(np.array([1.0] * 60 + [2.0] * 40))
    assert np.bincount(tied).tolist() == [60, 40]  # bins of one value merge: an edge is a value, not a rank


def split_targets(datasets) -> dict[str, np.ndarray]:
    return {
        name: np.concatenate([np.asarray(y).reshape(-1) for _, y in getattr(datasets, name)])
        for name in ("train", "validation", "test")
    }


@pytest.mark.parametrize("strata_bins", [BINS, None])
def test_each_split_holds_each_quantile_bin_in_proportion(compose_cfg, tmp_path, strata_bins):
    from tfhydra.data.pipeline import build_datasets
    from tfhydra.task.build import build_task

    targets = skewed_csv(tmp_path / "skewed.csv")
    cfg = compose_cfg(
        [
            "data=csv",
            f"data.path={tmp_path / 'skewed.csv'}",
            "data.label=price",
            "data.val_fraction=0.2",
            "data.test_fraction=0.2",
            "data.shuffle_buffer=0",
            "task=regression",
            f"task.strata_bins={'null' if strata_bins is None else strata_bins}",
        ]
    )
    datasets = build_datasets(cfg.data, cfg.trainer.seed, task=build_task(cfg.task))
    splits = split_targets(datasets)
    assert {k: len(v) for k, v in splits.items()} == {"train": 300, "validation": 100, "test": 100}
    assert np.allclose(np.sort(np.concatenate(list(splits.values()))), np.sort(targets))  # every example, once
    edges = np.quantile(targets, np.linspace(0, 1, BINS + 1)[1:-1])  # the bins of all the examples
    counts = {k: np.bincount(np.searchsorted(edges, v, side="right"), minlength=BINS) for k, v in splits.items()}
    off = max(int(np.abs(c - len(splits[k]) / BINS).max()) for k, c in counts.items())
    if strata_bins:
        assert off == 0, counts  # 60 of each bin in training, 20 in validation and in test
    else:
        assert off > 3, counts  # the seeded shuffle of these examples: validation 15 to 24 of each bin


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("1", "task.strata_bins=1: out of range; accepted: null or an integer >= 2"),
        ("2.5", "task.strata_bins=2.5: not an integer; accepted: null or an integer >= 2"),
    ],
)
def test_a_bad_strata_bins_is_one_line_before_tensorflow(value, line):
    with pytest.raises(ConfigError) as caught:
        check_overrides(CONFIG_DIR, "config", ["task=regression", f"task.strata_bins={value}"])
    assert str(caught.value) == line


@pytest.mark.parametrize("bins", [100_000_000, 10**11, 501])
def test_more_bins_than_examples_is_one_line_naming_the_key_before_the_bins_are_made(bins):
    """10^8 bins took 8.55 GB and 31 s, 10^11 a traceback: the examples to split are known, so the bins are bounded
    by them before any bin edge is made (the peak memory does not grow)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError) as caught:
        Regression(strata_bins=bins).strata(np.arange(500.0))
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 50
    assert str(caught.value) == (
        f"task.strata_bins={bins}: more bins than the 500 examples to split; accepted: null or an integer in [2, 500] "
        "(at most one bin per example to split)"
    )
    assert len(np.unique(Regression(strata_bins=500).strata(np.arange(500.0)))) == 500  # the bound itself is taken


def test_a_split_seed_beyond_numpys_range_is_refused_naming_it():
    """data.split_seed >= 2**32 used to be blamed on data.test_fraction once NumPy refused it in the job."""
    with pytest.raises(
        ConfigError, match=r"^data.split_seed=4294967296: .*accepted: null or an integer in \[0, 4294967295\]"
    ):
        check_overrides(CONFIG_DIR, "config", ["data.split_seed=4294967296"])
    check_overrides(CONFIG_DIR, "config", ["data.split_seed=4294967295"])
