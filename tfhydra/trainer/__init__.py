"""Training loops: `loop(cfg_trainer, model, datasets, callbacks) -> None`, selected by `trainer.loop`.

Every loop trains the compiled model and reports through the same Keras callbacks, so
TensorBoard, checkpoints and the run record are the same whichever loop ran.
"""
from __future__ import annotations

import tf_keras as keras

from tfhydra.registry import Registry

LOOPS = Registry("trainer.loop")


def train(cfg_trainer, model: keras.Model, datasets, callbacks: list[keras.callbacks.Callback]) -> None:
    LOOPS.get(cfg_trainer.loop)(cfg_trainer, model, datasets, callbacks)


@LOOPS.register("fit")
def fit_loop(cfg_trainer, model: keras.Model, datasets, callbacks: list[keras.callbacks.Callback]) -> None:
    model.fit(datasets.train, validation_data=datasets.validation, epochs=cfg_trainer.epochs,
              callbacks=callbacks, verbose=cfg_trainer.verbose)
