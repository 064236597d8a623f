"""The Hydra-side branches, in-process: with conftest's `hydra_job` fixture (HydraConfig set as `@hydra.main` sets it),
a test reaches what only a run under Hydra or a sweep's job does (`under_hydra`, `in_sweep`, the launcher's share of
the threads), in milliseconds instead of a ~1 s subprocess per case."""

from __future__ import annotations

from pathlib import Path

from tfhydra.platform.runtime import available_cores
from tfhydra.runner.hydra_files import hydra_overrides, hydra_run_dir, under_hydra
from tfhydra.sweep.kind import auto_threads, in_sweep, launcher_cpus, launcher_kind, parallel_jobs


def test_a_single_run_under_hydra_takes_its_directory_and_overrides_from_hydra(hydra_job, tmp_path, compose_cfg):
    plain = compose_cfg(["trainer.epochs=2"])
    assert (under_hydra(), in_sweep(), hydra_overrides(plain)) == (False, False, [])  # from Python: no Hydra
    cfg = hydra_job(["trainer.epochs=2", "model=mlp"])
    assert (under_hydra(), in_sweep()) == (True, False)
    assert hydra_run_dir() == Path(tmp_path / "job")
    assert hydra_overrides(cfg) == ["trainer.epochs=2", "model=mlp"]
    assert (parallel_jobs(), launcher_cpus()) == (1, None)  # not a sweep: one job, the launcher reserves nothing


def test_a_sweep_job_under_joblib_shares_the_cores_with_the_jobs_beside_it(hydra_job, monkeypatch):
    monkeypatch.delenv("TFHYDRA_WORKER_THREADS", raising=False)  # not a worker of tfhydra's launcher
    hydra_job(["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], multirun=True)
    assert (under_hydra(), in_sweep(), launcher_kind()) == (True, True, "joblib")
    assert parallel_jobs() == 2
    assert auto_threads() == max(1, available_cores() // 2)  # each of the 2 jobs: half the cores
    hydra_job(["hydra/launcher=joblib", "hydra.launcher.n_jobs=-1"], multirun=True)  # joblib's -1: one per core
    assert parallel_jobs() == available_cores()


def test_a_sweep_job_under_tfhydras_launcher_leaves_the_threads_to_its_worker(hydra_job, monkeypatch):
    monkeypatch.delenv("TFHYDRA_WORKER_THREADS", raising=False)
    hydra_job([], multirun=True)  # conf/'s default launcher: tfhydra's
    assert (in_sweep(), launcher_kind(), parallel_jobs(), launcher_cpus()) == (True, "tfhydra", 1, None)
    assert auto_threads() == 0  # outside a worker: TensorFlow decides
    monkeypatch.setenv("TFHYDRA_WORKER_THREADS", "3")
    assert auto_threads() == 3  # in a worker: its share of the cores
