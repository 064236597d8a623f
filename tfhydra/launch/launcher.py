"""tfhydra's launcher (hydra_plugins/tfhydra_launcher): a sweep's jobs in reused worker processes, as many at once
as the machine runs faster (tfhydra/launch/placement.py), in the order Hydra gave them. The launching process
never imports TensorFlow."""

from __future__ import annotations

import atexit
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfhydra.config.jobnames import current_swept_keys
from tfhydra.launch.placement import cpu_only, launcher_gpus, plan_workers
from tfhydra.platform.runtime import available_cores

log = logging.getLogger("tfhydra")


def launch_jobs(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    from hydra.core.singleton import Singleton
    from hydra.core.utils import configure_log, filter_overrides, setup_globals

    from tfhydra.launch.workers import WorkerPool

    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    plans = worker_plans(launcher.options, len(job_overrides))
    fewer = launcher.pool is not None and len(plans) < len(launcher.pool.plans)
    if launcher.pool is None or fewer:
        log.info(
            "tfhydra launcher: %d worker(s) for %d job(s): %s",
            len(plans),
            len(job_overrides),
            "; ".join(
                f"#{p.index}: {p.threads or 'TensorFlow decides'} thread(s)"
                + (f", GPU {','.join(p.gpus)}" if p.gpus else "")
                for p in plans
            ),
        )
    if launcher.pool is None:
        launcher.pool = WorkerPool(plans)
        atexit.register(launcher.pool.close)
    elif fewer:
        launcher.pool.replace(plans)  # a later, smaller launch (a staged sweep's promote stage): placed for its jobs
    log.info("Launching jobs, sweep output dir : %s", sweep_dir)
    for idx, overrides in enumerate(job_overrides):
        log.info("\t#%d : %s", initial_job_idx + idx, " ".join(filter_overrides(overrides)))
    state = Singleton.get_state()
    state.pop("omegaconf_resolvers", None)  # closures pickle cannot send: each worker registers its own (imports)
    swept = current_swept_keys(hydra_node=config.hydra)
    jobs = [
        (
            initial_job_idx + i,
            list(o),
            launcher.hydra_context,
            config,
            launcher.task_function,
            state,
            job_tag(initial_job_idx + i, o, swept),
        )
        for i, o in enumerate(job_overrides)
    ]
    try:
        returns = launcher.pool.run(jobs, sweep_dir)
    except KeyboardInterrupt as stop:
        signum = stop.args[0] if stop.args and isinstance(stop.args[0], int) else signal.SIGINT
        print(
            f"Stopped: {signal.Signals(signum).name}: the running jobs saved their state; resume with: "
            f"tfhydra-sweep resume {sweep_dir} (python -m tfhydra.sweep summary {sweep_dir} lists the sweep's "
            "completed, interrupted and not started jobs)",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(128 + int(signum))
    return [returns[job[0]] for job in jobs]


def worker_plans(options: Any, jobs: int) -> list:
    """The workers for a launch of `jobs` jobs (tfhydra/launch/placement.py), with the launcher's options."""
    from tfhydra.launch.worker_process import MAX_JOBS_ENV

    plans = plan_workers(
        jobs,
        available_cores(),
        launcher_gpus(options["gpus"]),
        workers=options["workers"],
        threads=options["threads"],
        gpu_memory_mb=options["gpu_memory_mb"],
    )
    for plan in plans:
        if options.get("max_jobs_per_worker"):
            plan.env[MAX_JOBS_ENV] = str(int(options["max_jobs_per_worker"]))
        if cpu_only(options["gpus"]):
            plan.env["CUDA_VISIBLE_DEVICES"] = "-1"  # CPU only, asked for: TensorFlow must not find a GPU
    return plans


def job_tag(idx: int, overrides: Sequence[str], swept: set[str]) -> str:
    """What starts each terminal line of a job: its number and swept values, each key by its last part
    (`[job 1 lr=0.001,batch_size=64]`), short enough to leave the line readable; `[job 1]` when nothing is swept."""
    values = []
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~") in swept:
            values.append(f"{key.lstrip('+~').rsplit('.', 1)[-1].rsplit('/', 1)[-1]}={value}")
    return f"[job {idx} {','.join(values)}]" if values else f"[job {idx}]"
