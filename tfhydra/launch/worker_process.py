"""What runs inside a worker process of tfhydra's launcher (the pool that starts them: tfhydra/launch/workers.py):
the job loop over the shared task queue, one Hydra job at a time as Hydra's joblib launcher runs it, the Keras
session cleared between jobs, and the watch that ends the worker when its launching process is killed outright.
Each result goes back as plain values (with the worker's job count and memory), since the job's configs hold
classes pickle refuses.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfhydra.config.hydra_api import job_return_value, set_job_return_value
from tfhydra.platform.quiet import TaggedLines
from tfhydra.platform.runtime import WORKER_ENV
from tfhydra.trust.locks import process_alive

WORKER_JOB_ENV = "TFHYDRA_WORKER_JOB"  # the job's ordinal in its worker (1 = its first), for the record
MAX_JOBS_ENV = "TFHYDRA_WORKER_MAX_JOBS"  # hydra.launcher.max_jobs_per_worker: a worker ends after that many jobs

TAGGED = TaggedLines()  # a worker's descriptors 1 and 2, tagged with the job it runs


def worker_main(env: dict, tasks: Any, results: Any, launcher: int) -> None:
    env = {**env, WORKER_ENV[4]: "1" if "tfhydra.runner.job" in sys.modules else "0"}  # from the fork server, or not
    os.environ.update(env)
    if not os.environ["PYTHONPATH"]:
        del os.environ["PYTHONPATH"]  # the launching process had none
    os.setpgrp()  # the terminal's Ctrl-C goes to the launching process, which passes it on once
    import tfhydra.platform.keras_env  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow)
    from tfhydra.platform.startup import leave_now, preload_job

    TAGGED.start()  # every line the worker prints carries its job's tag; TensorFlow's start-up noise dropped
    # a no-op when the fork server imported it; otherwise it loads while the first job composes
    preload_job("tfhydra.runner.job")
    _die_with_launcher(launcher)
    try:
        _serve(tasks, results)
    finally:  # what a job keeps is written by now: skip TensorFlow's teardown (about a second: platform/startup.py)
        results.close()
        results.join_thread()  # the last message is sent before the process goes
        TAGGED.release()
        leave_now()  # the atexit hooks too: TensorFlow's remove its autograph files from TMPDIR


def _serve(tasks: Any, results: Any) -> None:
    done = 0
    while True:
        try:
            task = tasks.get()
        except (KeyboardInterrupt, EOFError, OSError):
            return
        if task is None:
            return
        done += 1
        os.environ[WORKER_JOB_ENV] = str(done)
        results.put(("start", task[0], os.getpid(), None))
        TAGGED.for_job(task[6] if len(task) > 6 else f"[job {task[0]}]")  # (idx, overrides, ..., tag): launcher.py
        try:
            value = execute_job(*task[:6])
        except (KeyboardInterrupt, SystemExit):  # the job saved its state and recorded `interrupted`
            TAGGED.drain()
            results.put(("stopped", task[0], os.getpid(), None))
            return
        reset_between_jobs()
        TAGGED.drain()  # the job's last lines are out before the launcher hears it is done
        results.put(("done", task[0], os.getpid(), (plain_return(value), done, memory_mb())))
        if done == int(os.environ.get(MAX_JOBS_ENV) or 0):  # recycled: the pool starts a fresh worker in its place
            return


def plain_return(returned: Any) -> Any:
    """The JobReturn as plain values: its configs hold the plugins' structured-config classes, which Hydra's plugin
    scan loaded twice (pickle refuses them); an exception becomes its one line."""
    from omegaconf import OmegaConf

    for name in ("cfg", "hydra_cfg"):
        value = getattr(returned, name, None)
        if value is not None:
            setattr(returned, name, OmegaConf.create(OmegaConf.to_container(value, resolve=False)))
    error = job_return_value(returned)
    if isinstance(error, BaseException):
        set_job_return_value(returned, RuntimeError(f"{type(error).__name__}: {error}"))
    return returned


def memory_mb() -> tuple[float, float]:
    """(resident, peak resident) MB of this process, from /proc (0, 0 where there is none)."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
    except (OSError, KeyError, ValueError):
        return 0.0, 0.0


def _die_with_launcher(launcher: int) -> None:
    """The launching process killed outright (SIGKILL, usually to its whole process group, which the workers left):
    the worker goes the same way at once, as it would have in that group, so that nothing of it is still writing
    when the sweep is run again (a job it was training resumes from its last saved state, as after any SIGKILL).
    A worker's parent is the fork server, which lives on while any worker holds its pipe: so a thread watches the
    launching process itself (a pidfd, which a reused pid cannot fool); Linux's parent-death signal covers the
    fork server's end (it is in the launching process's group)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PDEATHSIG
    except (OSError, AttributeError):
        pass
    threading.Thread(target=_watch_launcher, args=(launcher,), name="tfhydra-watch-launcher", daemon=True).start()


def _watch_launcher(launcher: int) -> None:
    import select

    try:
        pidfd = os.pidfd_open(launcher)
    except ProcessLookupError:
        pidfd = None  # gone already
    except (AttributeError, OSError):  # no pidfd here: poll
        while process_alive(launcher):
            time.sleep(0.2)
        pidfd = None
    if pidfd is not None:
        select.select([pidfd], [], [])  # readable once the process has ended
    os.kill(os.getpid(), signal.SIGKILL)


def execute_job(
    idx: int, overrides: Sequence[str], hydra_context: Any, config: Any, task_function: Any, singleton_state: dict
) -> Any:
    """One job, as Hydra's joblib launcher runs it in its workers (hydra_joblib_launcher/_core.py)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals
    from omegaconf import open_dict

    from tfhydra.platform.private_api import omegaconf_resolvers

    setup_globals()  # Hydra's resolvers (`now`, `hydra`); tfhydra's were registered when the worker imported it
    Singleton.set_state({**singleton_state, "omegaconf_resolvers": omegaconf_resolvers()})
    sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
        sweep_config.hydra.job.num = idx
    HydraConfig.instance().set_config(sweep_config)
    return run_job(
        hydra_context=hydra_context,
        config=sweep_config,
        task_function=task_function,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def reset_between_jobs() -> None:
    """What a job leaves in its worker goes before the next: the Keras session (graphs, layer names, the
    global state of tf_keras) and the garbage that refers to it. The job's log handlers are Hydra's to replace."""
    import gc
    import sys

    keras = getattr(sys.modules.get("tfhydra.platform.keras_lib"), "keras", None)  # the run's Keras, if loaded
    if keras is not None:
        keras.backend.clear_session()
    gc.collect()
