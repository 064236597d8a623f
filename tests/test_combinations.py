"""Features that work alone, drawn together with a fault (issue 35, item 4): tests/combinations.py says the contract.

Bounded in CI: TFHYDRA_COMBINATION_CASES drawn cases (default 4; each is one to two real runs of 3 epochs), the
seed in pytest's header (TFHYDRA_HYPOTHESIS_SEED replays it). benchmarks/combinations.py runs as many as you like.
Pinned cases: the combinations issue 35 found broken (a blow-up with the default histograms, recovered under EMA in
the custom loop, and in a sweep), SIGTERM under pruning, and one the property found (gradients under mirrored).
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

import combinations
from conftest import HYPOTHESIS_SEED

pytestmark = pytest.mark.slow
CASES = int(os.environ.get("TFHYDRA_COMBINATION_CASES", "4"))
RAN: list[str] = []


@seed(HYPOTHESIS_SEED)
@settings(max_examples=CASES, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(case=combinations.strategies())
def test_drawn_features_with_a_fault_keep_the_run_contract(tmp_path_factory, case):
    outcome = combinations.check_case(case, tmp_path_factory.mktemp("combination") / "out")
    RAN.append(f"{case} -> {outcome}")
    print(RAN[-1])


def test_the_property_ran_its_cases():
    if not RAN:
        pytest.skip("the property did not run in this session")
    assert len(RAN) == CASES, RAN


@pytest.mark.parametrize("case", [
    combinations.Case(loop="custom", ema=True, recovery=3, histograms=True, gradients=True, fault="nan"),
    combinations.Case(loop="fit", histograms=True, recovery=0, fault="nan", sweep=True),
    combinations.Case(compression="prune", fault="sigterm"),
    # found by the property (seed 3294585354): gradients under mirrored failed every run at the first epoch's end
    combinations.Case(strategy="mirrored", ema=True, gradients=True, sweep=True, fault="sigterm"),
], ids=["nan-recovered-custom-ema-histograms", "nan-diverged-in-a-sweep", "sigterm-prune",
        "sigterm-sweep-mirrored-ema-gradients"])
def test_the_combinations_issue_35_found(tmp_path, case):
    combinations.check_case(case, tmp_path / "out")
