"""Where this process runs, as its scheduler says: a SLURM job (its id, array index, node list and restarts) or a
task on a Ray cluster (its job, node and address). The record keeps it (`scheduler`), so a result found on a
shared file system says which job of which cluster wrote it; `tfhydra-sweep summary` shows it per job.

SLURM says it in the job's environment (`SLURM_JOB_ID`, ...: sbatch(1) "OUTPUT ENVIRONMENT VARIABLES"); Ray in
the worker's runtime context, asked only when Ray is already imported (a Ray task's process has imported it; any
other process is not on a Ray cluster, and importing Ray would cost it seconds).
"""

from __future__ import annotations

import os
import sys

# the record's name for each of SLURM's variables; a requeued job keeps its id and counts SLURM_RESTART_COUNT up
SLURM_VARIABLES = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "node_list": "SLURM_JOB_NODELIST",
    "restarts": "SLURM_RESTART_COUNT",
    "partition": "SLURM_JOB_PARTITION",
}


def scheduler() -> dict | None:
    """{kind: slurm, job_id, array_job_id, array_task_id, node_list, restarts, partition} or {kind: ray, job_id,
    node_id, node_ip}; None for a process no scheduler started."""
    if os.environ.get("SLURM_JOB_ID"):
        found: dict = {name: os.environ.get(variable) for name, variable in SLURM_VARIABLES.items()}
        found["restarts"] = int(found["restarts"] or 0)
        return {"kind": "slurm", **found}
    return ray_task()


def ray_task() -> dict | None:
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    return {
        "kind": "ray",
        "job_id": context.get_job_id(),
        "node_id": context.get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
    }


def where(record_scheduler: dict | None) -> str:
    """One phrase for a summary: `slurm 12_1 on node[1-2]`, `ray job 02000000 on 10.0.0.3`, or ''."""
    found = record_scheduler if isinstance(record_scheduler, dict) else {}
    if found.get("kind") == "slurm":
        array = found.get("array_job_id")
        job = f"{array}_{found.get('array_task_id')}" if array else found.get("job_id")
        restarts = found.get("restarts")
        requeued = f", restarted {restarts}x" if isinstance(restarts, int) and restarts else ""
        return f"slurm {job} on {found.get('node_list')}{requeued}"
    if found.get("kind") == "ray":
        return f"ray job {found.get('job_id')} on {found.get('node_ip')}"
    return ""
