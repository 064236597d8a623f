"""A Keras callback attached to a tiny compiled model, as `fit` attaches it: shared by the callback tests
(tests/trainer/) and the terminal's rounding test (tests/platform/test_terminal_rounding.py)."""

import tf_keras as keras


def tiny_model() -> keras.Model:
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    return model


def attached(callback, model=None, epochs=3, steps=4):
    callback.set_model(model or tiny_model())
    callback.set_params({"epochs": epochs, "steps": steps, "verbose": 0})
    return callback
