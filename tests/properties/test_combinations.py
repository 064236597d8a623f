"""Features that work alone, drawn together with a fault (issue 35, item 4) under a drawn task (issue 44, item 5):
tests/combinations.py says the contract.

Bounded in CI: TFHYDRA_COMBINATION_CASES drawn cases (default 4; each is one to two real runs of 3 epochs) from
SEED (TFHYDRA_COMBINATION_SEED draws others). Each `python train.py` is forked from the tests' server
(conftest's `start_cli`), which has imported TensorFlow once. benchmarks/combinations.py runs as many as you like.
Pinned cases: the combinations issue 35 found broken (a blow-up with the default histograms, recovered under EMA in
the custom loop, and in a sweep), SIGTERM under pruning, and one the property found (gradients under mirrored).
"""

from __future__ import annotations

import json
import os

import combinations
import pytest
from conftest import counts_cases, start_cli
from hypothesis import HealthCheck, Phase, given, seed, settings

pytestmark = pytest.mark.slow
CASES = int(os.environ.get("TFHYDRA_COMBINATION_CASES", "4"))
# CI draws from a seed whose cases are known to pass, so a landing does not hang on which combination a run draws;
# TFHYDRA_COMBINATION_SEED=<n> (or benchmarks/combinations.py) explores others, and what they find is pinned below.
# With every combination drawn (2026-12-07) this seed's four cases are: a classification on digits; a pruned
# multi-label run under mirrored in the custom loop, mixed precision, EMA, recovery, gradients and pictures, killed
# and resumed; a Keras 3 regression sweep under mixed precision with recovery; a Keras 3 mirrored classification
# under mixed precision with EMA and pictures, killed and resumed. Each kept the contract when drawn.
SEED = int(os.environ.get("TFHYDRA_COMBINATION_SEED") or 3294585354)


@counts_cases()
@seed(SEED)
@settings(max_examples=CASES, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(case=combinations.strategies())
def test_drawn_features_with_a_fault_keep_the_run_contract(tmp_path_factory, case):
    outcome = combinations.check_case(case, tmp_path_factory.mktemp("combination") / "out", start_cli)
    print(f"{case} -> {outcome}")


def test_a_killed_pruning_run_under_mirrored_with_recovery_resumes(tmp_path):
    """Found with TFHYDRA_COMBINATION_CASES=12 and taken for pruning's: every keras=2 run under mirrored with
    `trainer.recovery.max_trials` > 0 failed at its first step (the schedule recovery sets made its rate variable
    inside the replicated step; tfhydra/platform/private_api.py: make_current_rate_variable)."""
    combinations.check_case(
        combinations.Case(
            loop="fit",
            strategy="mirrored",
            recovery=3,
            histograms=False,
            gradients=True,
            compression="prune",
            data="synthetic",
            fault="sigkill",
        ),
        tmp_path / "out",
        start_cli,
    )


def test_a_pruning_run_under_mirrored_in_the_custom_loop_completes_at_its_sparsity(tmp_path):
    """Found by benchmarks/combinations.py (2026-12-06): the Model Optimization Toolkit's mask update at an epoch's
    end failed on a MirroredVariable (the custom loop ran its callbacks outside the strategy's scope, where
    `model.fit` runs them inside; tfhydra/trainer/custom.py)."""
    combinations.check_case(
        combinations.Case(loop="custom", strategy="mirrored", compression="prune", histograms=False),
        tmp_path / "out",
        start_cli,
    )
    compression = json.loads((tmp_path / "out" / "metrics.json").read_text())["compression"]
    assert compression["sparsity"]["overall"] == pytest.approx(0.5, abs=0.01), (
        compression
    )  # compression.target_sparsity


@pytest.mark.parametrize(
    "case",
    [
        combinations.Case(loop="custom", ema=True, recovery=3, histograms=True, gradients=True, fault="nan"),
        combinations.Case(loop="fit", histograms=True, recovery=0, fault="nan", sweep=True),
        combinations.Case(compression="prune", fault="sigterm"),
        # found by the property (seed 3294585354): gradients under mirrored failed every run at the first epoch's end
        combinations.Case(strategy="mirrored", ema=True, gradients=True, sweep=True, fault="sigterm"),
        # Keras 3 (docs/keras.md): the custom loop's loss scaling, EMA and gradients, stopped and resumed
        combinations.Case(keras=3, loop="custom", precision="mixed", ema=True, gradients=True, fault="sigterm"),
        # found by benchmarks/combinations.py: recovery under mirrored failed every keras=2 run at its first step
        combinations.Case(loop="custom", strategy="mirrored", recovery=3, fault="nan"),
    ],
    ids=[
        "nan-recovered-custom-ema-histograms",
        "nan-diverged-in-a-sweep",
        "sigterm-prune",
        "sigterm-sweep-mirrored-ema-gradients",
        "sigterm-keras3-custom-mixed-ema-gradients",
        "nan-recovered-custom-mirrored",
    ],
)
def test_the_combinations_issue_35_found(tmp_path, case):
    combinations.check_case(case, tmp_path / "out", start_cli)
