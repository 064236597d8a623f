"""Metrics of tfhydra's own that the tasks' defaults name (conf/task/*.yaml), built in the run's Keras
(tfhydra/platform/keras_lib.py). Imported by the job when Hydra instantiates the trainer's metrics, never by the
pre-flight (this module imports TensorFlow).

`DefinedLabelsAUC`: Keras' `AUC(multi_label=True)` averages the ROC AUC of every label, and a label the split never
shows (or always shows) has no ROC curve: Keras counts it as 0, so one absent label of four takes a quarter off
the figure the run is monitored, chosen and reported by. This one averages the labels the split defines only (both
present and absent in some example), as scikit-learn's per-label figures leave such a label undefined; with every
label defined it is Keras' figure, bit for bit."""

from __future__ import annotations

import tensorflow as tf

from tfhydra.platform.keras_lib import keras


@keras.saving.register_keras_serializable(package="tfhydra")  # Keras 3 clones a model's compiled metrics by name
class DefinedLabelsAUC(keras.metrics.AUC):
    def result(self):
        roc = str(self.curve).rsplit(".", 1)[-1].upper() == "ROC"
        interpolation = str(self.summation_method).rsplit(".", 1)[-1].upper() == "INTERPOLATION"
        if not (self.multi_label and roc and interpolation and self.label_weights is None):
            return super().result()
        tp, fp, tn, fn = (
            tf.convert_to_tensor(v)
            for v in (self.true_positives, self.false_positives, self.true_negatives, self.false_negatives)
        )
        recall = tf.math.divide_no_nan(tp, tp + fn)  # (thresholds, labels)
        fp_rate = tf.math.divide_no_nan(fp, fp + tn)
        by_label = tf.reduce_sum((fp_rate[:-1] - fp_rate[1:]) * (recall[:-1] + recall[1:]) / 2.0, axis=0)
        # at the lowest threshold every example is counted once: present (tp + fn) or absent (fp + tn)
        defined = tf.cast(tf.logical_and(tp[0] + fn[0] > 0, fp[0] + tn[0] > 0), by_label.dtype)
        return tf.math.divide_no_nan(tf.reduce_sum(by_label * defined), tf.reduce_sum(defined))
