"""Which cluster a sweep's launcher waits on, and how it is asked (tfhydra/launch/cluster_watch.py); the watch
against a real Ray head stopped mid-sweep is in tests/launch/test_sweep_cluster.py."""

import socket

import pytest
from omegaconf import OmegaConf

from tfhydra.launch.cluster_watch import watched_cluster

RAY = "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
SLURM = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


def launcher(target: str, **init) -> OmegaConf:
    return OmegaConf.create({"hydra": {"launcher": {"_target_": target, "ray": {"init": init}}}})


@pytest.mark.parametrize("address", [None, "auto", "local", "127.0.0.1"])
def test_a_ray_runtime_of_the_sweep_s_own_or_found_by_ray_is_not_watched(address):
    assert watched_cluster(launcher(RAY, address=address)) is None


def test_a_ray_head_s_port_is_asked_for_an_http2_answer():
    with socket.socket() as listening:  # refused: nothing listens on a port just closed
        listening.bind(("127.0.0.1", 0))
        port = listening.getsockname()[1]
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        cluster = watched_cluster(launcher(RAY, address=address))
        assert cluster is not None and cluster.jobs_end_with_us
        assert cluster.name == f"the Ray head at hydra.launcher.ray.init.address={address}"
        assert cluster.ask().startswith(f"cannot connect to 127.0.0.1:{port} within 3 s (")


def test_the_slurm_controller_is_asked_with_scontrol_ping_and_other_launchers_are_not_watched():
    cluster = watched_cluster(launcher(SLURM))
    assert cluster is not None and not cluster.jobs_end_with_us
    assert cluster.name == "the SLURM controller (scontrol ping)"
    for other in ("hydra_plugins.tfhydra_launcher.tfhydra_launcher.TfhydraLauncher", "x.BasicLauncher"):
        assert watched_cluster(launcher(other)) is None
