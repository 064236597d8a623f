"""What the fork server of tfhydra's launcher imports (tfhydra/launch/fork_server.py's PRELOAD), and nothing else.

The import is silent: TensorFlow's start-up lines (oneDNN, the CUDA stub) go to the server's standard error,
which is the launching command's, and a check that fails after the pre-flight (a damaged Optuna study, say)
must still be answered in one line. The server's standard error is the terminal again once the import is done,
so the workers forked from it write their logs as before. A failed import is left to the workers: each then
imports TensorFlow itself and shows the error (the record's `worker.tensorflow_preloaded` is false).
"""

import os

_terminal = os.dup(2)
_quiet = os.open(os.devnull, os.O_WRONLY)
os.dup2(_quiet, 2)
try:
    import tfhydra.runner.job  # noqa: F401
except Exception:  # noqa: BLE001  (any error: the fork server must keep serving)
    pass
finally:
    os.dup2(_terminal, 2)
    os.close(_terminal)
    os.close(_quiet)
