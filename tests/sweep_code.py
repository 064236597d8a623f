"""User code for the sweep tests (tests/ is on sys.path in CLI runs): a callback that makes one job fail."""

import math

import tf_keras as keras


class FailAtLearningRate(keras.callbacks.Callback):
    """Raises when training starts with this learning rate: one job of an `optimizer.lr` sweep fails."""

    def __init__(self, lr: float):
        super().__init__()
        self.lr = lr

    def on_train_begin(self, logs=None):
        rate = float(keras.backend.get_value(self.model.optimizer.learning_rate))
        if math.isclose(rate, self.lr, rel_tol=1e-6):
            self.act(rate)

    def act(self, rate: float) -> None:
        raise RuntimeError(f"injected failure at lr={rate:g}")


class KillAtLearningRate(FailAtLearningRate):
    """SIGKILLs its own process instead: a job lost as a job killed on a cluster is (the kernel's OOM killer, a
    lost node), leaving no word in its record."""

    def act(self, rate: float) -> None:
        import os
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


class StepCounter(keras.callbacks.Callback):
    """Writes the optimizer steps taken, when training ends, to `path`."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def on_train_end(self, logs=None):
        with open(self.path, "w") as out:
            out.write(str(int(self.model.optimizer.iterations)))
