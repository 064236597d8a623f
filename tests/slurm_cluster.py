"""A real one-node SLURM cluster on 127.0.0.1 for tests/launch/test_slurm.py: Debian's munge, slurmctld and
slurmd, started as a site administrator starts them, in a directory of their own, and stopped by their pids afterwards.

Nothing is written under /etc: the daemons and every SLURM command read the cluster from `$SLURM_CONF` (the
fixture's slurm.conf) and talk to munge through the fixture's socket, so two pytest-xdist workers can each run
a cluster of their own. The daemons need root (slurmd starts the jobs as their user); the packages are
installed when missing, as .ci/run does. A cluster that cannot start is a failure, never a skip.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tb_server import free_port

PACKAGES = ("slurm-wlm", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")


def install_packages() -> None:
    """Debian's SLURM and munge, when a daemon is missing (about 25 s)."""
    if all(shutil.which(d) or Path("/usr/sbin", d).exists() for d in DAEMONS):
        return
    assert os.geteuid() == 0, "a real SLURM needs root to install and start (apt-get install slurm-wlm munge)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], env=env, check=True, capture_output=True)


def slurm_conf(home: Path, socket: Path, cpus: int) -> str:
    """One node (this machine, as `localhost`) in one default partition; no accounting, no cgroups (the
    settings a one-node cluster in a container runs with: proctrack/linuxproc, task/none)."""
    ctld, slurmd = free_port(), free_port()
    return "\n".join(
        [
            "ClusterName=tfhydra-test",
            "SlurmctldHost=localhost(127.0.0.1)",
            "SlurmUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={socket}",
            f"SlurmctldPort={ctld}",
            f"SlurmdPort={slurmd}",
            f"StateSaveLocation={home / 'state'}",
            f"SlurmdSpoolDir={home / 'spool'}",
            f"SlurmctldPidFile={home / 'slurmctld.pid'}",
            f"SlurmdPidFile={home / 'slurmd.pid'}",
            f"SlurmctldLogFile={home / 'slurmctld.log'}",
            f"SlurmdLogFile={home / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "KillWait=10",  # SIGTERM, then SIGKILL 10 s later: a cancelled job's handler has time to save its state
            f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=8000 State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def start_munge(home: Path) -> tuple[subprocess.Popen, Path]:
    """munged as the munge user with a fresh key; its socket in a directory every user can enter."""
    keys, sockets = home / "munge", home / "sock"
    keys.mkdir(mode=0o700)
    sockets.mkdir(mode=0o755)
    (keys / "munge.key").write_bytes(os.urandom(1024))
    (keys / "munge.key").chmod(0o400)
    for path in (keys, keys / "munge.key", sockets):
        shutil.chown(path, "munge", "munge")
    socket = sockets / "munge.sock"
    flags = [f"--key-file={keys / 'munge.key'}", f"--socket={socket}", f"--log-file={keys / 'munged.log'}"]
    flags += [f"--pid-file={keys / 'munged.pid'}", f"--seed-file={keys / 'munge.seed'}", "--foreground"]
    daemon = subprocess.Popen(
        ["runuser", "-u", "munge", "--", "munged", *flags], stderr=subprocess.DEVNULL, start_new_session=True
    )  # munged logs to its log file too
    wait_for(lambda: socket.exists(), daemon, keys / "munged.log", "munged's socket")
    return daemon, socket


def wait_for(ready, daemon: subprocess.Popen, log: Path, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        text = log.read_text()[-3000:] if log.exists() else "(no log)"
        assert daemon.poll() is None, f"{what}: the daemon exited {daemon.returncode}: {text}"
        assert time.monotonic() < deadline, f"{what}: not ready after {seconds} s: {text}"
        time.sleep(0.25)


def node_idle(env: dict) -> bool:
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=30)
    return done.returncode == 0 and done.stdout.strip() == "idle"


def stop(daemon: subprocess.Popen) -> None:
    if daemon.poll() is None:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()


@contextlib.contextmanager
def running_cluster():
    """The cluster's daemons, started; the environment that reaches them. Jobs left running are cancelled before
    the daemons stop (`python tests/slurm_cluster.py` keeps one up until Ctrl-C)."""
    install_packages()
    home = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))  # socket paths must fit AF_UNIX's 107 bytes
    home.chmod(0o755)
    daemons: list[subprocess.Popen] = []
    try:
        munge, socket = start_munge(home)
        daemons.append(munge)
        for folder in ("state", "spool"):
            (home / folder).mkdir()
        (home / "slurm.conf").write_text(slurm_conf(home, socket, os.cpu_count() or 2))
        env = {**os.environ, "SLURM_CONF": str(home / "slurm.conf")}
        for command in (["slurmctld", "-D", "-i"], ["slurmd", "-D", "-N", "localhost"]):
            log = (home / f"{command[0]}.out").open("w")
            started = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            daemons.append(started)
        wait_for(lambda: node_idle(env), daemons[-1], home / "slurmd.log", "slurmd's node")
        yield env
        subprocess.run(["scancel", "--full", "--user=root"], env=env, capture_output=True, timeout=30)
        wait_for(lambda: not squeue(env), daemons[-1], home / "slurmd.log", "the cancelled jobs", seconds=60)
    finally:
        for daemon in reversed(daemons):
            stop(daemon)
        shutil.rmtree(home, ignore_errors=True)


def squeue(env: dict) -> list[dict]:
    """The cluster's jobs as {id, array_job, array_task, state, node_list, restarts}, one per array element."""
    fields = "%i|%F|%K|%T|%N|%r"
    done = subprocess.run(["squeue", "-h", "-o", fields], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    rows = [line.split("|") for line in done.stdout.splitlines() if line.strip()]
    names = ("id", "array_job", "array_task", "state", "node_list", "reason")
    return [dict(zip(names, row, strict=True)) for row in rows]


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # kill, or Ctrl-C: the daemons are stopped either way
    with running_cluster() as cluster_env:
        print(f"export SLURM_CONF={cluster_env['SLURM_CONF']}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
