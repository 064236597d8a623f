"""How a sweep's jobs run as processes: tfhydra's own Hydra launcher and what it needs.

The sweep room (tfhydra/sweep/) says what a sweep is (its jobs' names, stages, search, summary); this room
runs its jobs. Its files:
- launcher.py: `launch_jobs`, the work of hydra_plugins/tfhydra_launcher (the plugin class only hands over);
- placement.py: how many worker processes, the threads and GPUs of each (plain functions, no process);
- workers.py: the worker pool: processes reused job after job, signals passed on, a dead worker's job recorded;
- worker_process.py: inside a worker: the job loop, one Hydra job at a time, the watch on the launching process;
- fork_server.py: the process the workers are forked from, TensorFlow imported once (tfhydra/launch/preload.py);
- lost_jobs.py: a job a cluster launcher lost (submitit, Ray) recorded as failed, then one `Error:` line;
- cluster_watch.py: beside a cluster launcher's launch, its Ray head or SLURM controller asked whether it answers
  (`sweep.cluster_timeout`), and SIGTERM/SIGINT acted on while the launcher waits inside C++;
- preload.py: what the fork server imports (TensorFlow, through the recipe), silently.
Nothing here imports TensorFlow in the launching process: only the fork server and the workers do.
"""
