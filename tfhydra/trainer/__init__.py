"""Training loops `loop(cfg_trainer, model, datasets, callbacks, context)`, selected by `trainer.loop`.

Rooms: checks.py (what the run plan checks in the trainer section, no TensorFlow), base.py (the loop registry
and what a loop is handed), loops.py (the fit loop), custom.py (the tf.function loop), callbacks.py (the list a
run trains with: the recorder, best weights, TensorBoard), choosing.py (what a validation decides: the best
weights, early stopping), validation.py (validation every N steps, trainer.val_every_steps), stopping.py (a time
budget and targets, and why a run stopped), progress.py (an epoch's live bar), objectives.py (loss and metrics;
mixed_targets.py their twins for data.augment's mixed one-hot targets), state.py (resumable state and signals),
restore.py (which saved state a resumed run restores), weights.py (the weights kept between attempts and exported),
recovery.py (back to the last good state after a
blow-up), ema.py (EMA weights), debugging.py (numeric checks and where a NaN came from), and what TensorBoard
shows: histograms.py, gradients.py, pictures.py (examples, confusion matrix, mistakes), scatter.py (a regression's
predicted against true), summaries.py (their file writers), figures.py (labelled pictures with matplotlib), graph.py
(the Graphs tab).

This face names nothing, so importing the package (the run plan reads checks.py before TensorFlow is loaded)
imports no TensorFlow. The names are imported from their module: `from tfhydra.trainer.base import LOOPS,
LoopContext` (the loop registry, which imports loops.py and custom.py on its first lookup),
`from tfhydra.trainer.loops import train`.
schemas.py: the `trainer:` section's type (dataclasses named by conf/'s YAML; docs/design.md
"Typed configs").
"""
