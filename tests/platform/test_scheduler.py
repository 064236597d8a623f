"""Where a job ran and what the user typed, as the record keeps them (tfhydra/platform/scheduler.py and
command.py): read from SLURM's job environment, and handed from a sweep to its jobs through Hydra's overrides."""

import sys

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from tfhydra.platform import command
from tfhydra.platform.scheduler import SLURM_VARIABLES, scheduler, where
from tfhydra.sweep.handover import handover_overrides

SLURM_JOB = {
    "SLURM_JOB_ID": "41",
    "SLURM_ARRAY_JOB_ID": "40",
    "SLURM_ARRAY_TASK_ID": "1",
    "SLURM_JOB_NODELIST": "gpu[01-02]",
    "SLURM_RESTART_COUNT": "2",
    "SLURM_JOB_PARTITION": "gpu",
}


@pytest.fixture
def no_slurm(monkeypatch):
    for variable in SLURM_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv(command.COMMAND_ENV, raising=False)


def test_a_slurm_job_says_its_job_array_task_nodes_and_restarts(no_slurm, monkeypatch):
    for name, value in SLURM_JOB.items():
        monkeypatch.setenv(name, value)
    found = scheduler()
    assert found == {
        "kind": "slurm",
        "job_id": "41",
        "array_job_id": "40",
        "array_task_id": "1",
        "node_list": "gpu[01-02]",
        "restarts": 2,
        "partition": "gpu",
    }
    assert where(found) == "slurm 40_1 on gpu[01-02], restarted 2x"
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    assert where(scheduler()) == "slurm 41 on gpu[01-02]"


def test_a_process_no_scheduler_started_has_none(no_slurm):
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    assert scheduler() is None and where(None) == "" and where({"kind": "other"}) == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["train.py", "-m", "optimizer.lr=1e-3,5e-4"],
        ["train.py", "-m", "model.name=${oops}", "data.path='a b'", 'x="q"', "y=\\'z", "hydra/launcher=submitit_slurm"],
    ],
)
def test_the_users_command_reaches_a_job_through_a_hydra_override_as_typed(no_slurm, monkeypatch, argv):
    monkeypatch.setattr(sys, "argv", argv)
    typed = command.this_command()
    handed = [o for o in handover_overrides(["optimizer.lr"], "/s") if command.COMMAND_ENV in o]
    (parsed,) = OverridesParser.create().parse_overrides(handed)  # the grammar Hydra reads the sweep's overrides by
    monkeypatch.setattr(sys, "argv", ["/venv/lib/submitit/core/_submit.py", "/folder"])  # the job's own process
    monkeypatch.setenv(command.COMMAND_ENV, parsed.value())
    assert command.user_command() == typed and "_submit" not in command.user_command()
    monkeypatch.setenv(command.COMMAND_ENV, "not base64 of a string!")
    assert command.user_command().endswith("_submit.py /folder")  # a value that does not decode is ignored
