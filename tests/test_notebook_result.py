"""The notebook's `Result` reads its figures from the record: the test split's among them (tfhydra/notebook.py)."""

import pytest
from shared_runs import DIGITS_MLP, trained_run

import tfhydra


@pytest.fixture(scope="session")
def mlp_run(tmp_path_factory):
    return trained_run(tmp_path_factory, *DIGITS_MLP)


@pytest.mark.slow
def test_a_result_shows_the_test_figures_beside_the_best_epochs(mlp_run):
    result = tfhydra.load_result(mlp_run)
    tested = result.record.test["metrics"]
    assert result.test == tested and set(tested) >= {"loss", "accuracy"} and 0 < result.test["accuracy"] <= 1
    assert result.headline["test_accuracy"] == tested["accuracy"]
    assert "test accuracy=" in repr(result)
