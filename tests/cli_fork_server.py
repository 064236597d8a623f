"""One TensorFlow import for many `python train.py` checks: the tests' command runs forked from this server.

A command-line test pays about 4.5 s of CPU to import TensorFlow, tf_keras and tfhydra before its run even
starts (measured: `python train.py debug=fast` takes 5.6 s, 4.8 s of it the import); the suite runs the command
a few hundred times. This server imports them once (tfhydra/launch/preload.py, what tfhydra's own launcher
preloads for its workers, silently) and forks one child per request. The child is the command as a user
starts it: its own working directory, environment, `sys.argv` and `sys.path`, standard streams on files,
`train.py` run as `__main__`, and the interpreter's own exit (atexit handlers, the exit code of an uncaught
exception). What a fork cannot be is a process that has not imported TensorFlow yet: tests of start-up and
import order, of environments read at import, and the journeys (a fresh venv, a wheel) start real processes.

Why the fork is safe: the server only imports. TensorFlow's runtime (devices, thread pools) starts in the
child, never here, and the server runs no thread (children are reaped by polling, not by a thread).

The same holds for `python -m MODULE ARGV` (`tfhydra.evaluate`, `tfhydra.predict`): a request naming a module
runs it as `__main__` with the working directory first on `sys.path`, as `-m` puts it.

Protocol: one JSON request per connection ({argv, cwd, env, stdout, stderr}, and `module` for `-m`); the server
answers the child's pid on one line, then its exit code (negative: the signal that ended it) when it has exited.
"""

from __future__ import annotations

import json
import os
import runpy
import selectors
import socket
import sys

TRAIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "train.py")


def _base_path() -> list[str]:
    """The server's sys.path without its own script folder and PYTHONPATH: what every child's path ends with."""
    extra = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    return [p for p in sys.path[1:] if os.path.abspath(p or ".") not in extra]


def _exit_code(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def serve(address: str) -> dict:
    """Answer requests until one is a child's: that child returns its request; the server never returns."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        for _ready in selector.select(timeout=0.05):
            connection, _ = listener.accept()
            request = json.loads(connection.makefile("r").readline())
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                for other in (listener, connection, *waiting.values()):
                    other.close()
                selector.close()
                return request
            connection.sendall(f"{pid}\n".encode())
            waiting[pid] = connection
        for pid in list(waiting):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                connection = waiting.pop(pid)
                try:
                    connection.sendall(f"{_exit_code(status)}\n".encode())
                except OSError:
                    pass  # the test gave up on it (a timeout)
                connection.close()


def become_the_command(request: dict, base_path: list[str]) -> str | None:
    """Turn this child into `python train.py ARGV` (or `python -m MODULE ARGV`) started in `cwd` with `env` and its
    streams on files; returns the module, if one is asked for."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import importlib

    import tfhydra.platform.keras_env as keras_env

    importlib.reload(keras_env)  # what importing tfhydra sets in a fresh process's environment
    for fd, path, mode in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY),
        (2, request["stderr"], os.O_WRONLY),
    ):
        opened = os.open(path, mode)
        os.dup2(opened, fd)
        os.close(opened)
    python_path = [os.path.abspath(p) for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    module = request.get("module")
    sys.path[:] = [os.getcwd() if module else os.path.dirname(TRAIN), *python_path, *base_path]
    sys.argv = [module or TRAIN, *request["argv"]]
    return module


if __name__ == "__main__":
    _base = _base_path()
    import tfhydra.launch.preload  # noqa: F401  (TensorFlow, tf_keras and tfhydra's job, silently)

    _module = become_the_command(serve(sys.argv[1]), _base)
    if _module:
        runpy.run_module(_module, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(TRAIN, run_name="__main__")
