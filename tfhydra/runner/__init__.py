"""One run, in order: plan.py (the TensorFlow-free plan the pre-flight checks), job.py (the recipe: the only
module that knows the order of a run), phase.py (one training phase: strategy, data, model, loop, export),
hydra_files.py (the .hydra/ files a run keeps). Imports the group rooms and the ground floor, never the sweep."""
