"""A user's own code, referenced from configs by `_target_` (tests put this folder on sys.path)."""
import tf_keras as keras


def build_tiny_model(spec, units: int = 8):
    """A user model builder: gets its YAML keys as keyword arguments plus the data spec."""
    inputs = keras.Input(spec.input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(units, activation="relu")(x)
    outputs = keras.layers.Dense(spec.num_classes, activation="softmax")(x)
    return keras.Model(inputs, outputs, name=f"tiny{units}")


def not_a_model(spec):
    return "not a model"


class SmoothedCrossEntropy(keras.losses.Loss):
    """A user loss with an argument, to show `trainer.loss._target_`."""

    def __init__(self, smoothing: float = 0.1, name: str = "smoothed_ce"):
        super().__init__(name=name)
        self.smoothing = smoothing

    def call(self, y_true, y_pred):
        import tensorflow as tf

        classes = tf.shape(y_pred)[-1]
        one_hot = tf.one_hot(tf.cast(tf.reshape(y_true, [-1]), tf.int32), classes)
        return keras.losses.categorical_crossentropy(one_hot, y_pred, label_smoothing=self.smoothing)
