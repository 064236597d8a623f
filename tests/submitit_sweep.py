"""One sweep on Hydra's submitit launcher in its local mode (the SLURM launcher's code, with local processes for
SLURM jobs), shared by tests/launch/test_sweep_cluster.py and tests/logger/test_broken_trackers_and_sweeps.py: its
three jobs show each way a job ends on a cluster. Job 0 SIGKILLs its own process in training (a job lost as the
kernel's OOM killer or a lost node loses it), job 1 raises in training, job 2 completes. Swept once per session
across xdist workers (tests/shared_runs.py); read only."""

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from shared_runs import made_once

JOBS = ["0_optimizer.lr=0.001", "1_optimizer.lr=0.0005", "2_optimizer.lr=0.0001"]
KILLED, FAILED, COMPLETED = JOBS
CALLBACKS = (
    "trainer.callbacks=[{_target_: sweep_code.KillAtLearningRate, lr: 0.001},"
    "{_target_: sweep_code.FailAtLearningRate, lr: 0.0005}]"
)


@pytest.fixture(scope="session")
def submitit_sweep(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The command's answer, its sweep directory and submitit's folder (its own logs of each job)."""

    def make(root: Path) -> None:
        root.mkdir()
        result = run_cli(
            "-m",
            "hydra/launcher=submitit_local",
            "hydra.launcher.timeout_min=5",
            "hydra.launcher.cpus_per_task=2",
            "hydra.launcher.tasks_per_node=1",
            f"hydra.launcher.submitit_folder={root / 'submitit' / '%j'}",
            f"hydra.sweep.dir={root / 'sweep'}",
            "optimizer.lr=1e-3,5e-4,1e-4",
            "model=mlp",
            "debug=fast",
            CALLBACKS,
            cwd=root,
            timeout=400,
        )
        answer = {"args": result.args, "returncode": result.returncode, "stdout": result.stdout}
        (root / "answer.json").write_text(json.dumps({**answer, "stderr": result.stderr}))

    root = made_once(tmp_path_factory, "submitit-local-sweep", make)
    answer = json.loads((root / "answer.json").read_text())
    return subprocess.CompletedProcess(**answer), root / "sweep", root / "submitit"
