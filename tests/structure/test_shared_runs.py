"""The shared-run helper itself: made once, remade after a failure, copied for a test that changes it."""

import pytest
from shared_runs import copy_run, made_once


def test_a_shared_run_is_made_once_and_a_failed_one_is_made_again(tmp_path_factory, tmp_path):
    made = []

    def make(run):
        made.append(run)
        run.mkdir()
        (run / "metrics.json").write_text("{}")

    first = made_once(tmp_path_factory, "probe-once", make)
    again = made_once(tmp_path_factory, "probe-once", make)
    assert first == again and len(made) == 1 and (first / "metrics.json").read_text() == "{}"

    def fail(run):
        run.mkdir()
        raise RuntimeError("no")

    for _ in range(2):
        with pytest.raises(RuntimeError):
            made_once(tmp_path_factory, "probe-fails", fail)  # no done mark: the second asker tries again

    copy = copy_run(first, tmp_path / "mine")
    (copy / "metrics.json").write_text('{"changed": 1}')
    assert (first / "metrics.json").read_text() == "{}"
