"""One run, in order: plan.py (the TensorFlow-free plan the pre-flight checks), job.py (the recipe: the only
module that knows the order of a run), phase.py (one training phase: strategy, data, model, loop, export),
compiled_model.py (the phase's model, compression and optimizer, compiled), phase_report.py (what a phase tells
the trackers, the record, the recipe and the terminal), hydra_files.py (the .hydra/ files a run keeps), run_config.py
(the composed config as a type, for mypy). Imports the group rooms and the ground floor, never the sweep (but for
its checks and schemas, which the plan reads)."""
