"""Does a gRPC server answer at host:port? Asked of servers tfhydra does not own: a tf.data service dispatcher
(tfhydra/data/service.py) and a Ray head's GCS (tfhydra/launch/cluster_watch.py).

A TCP connect alone is not an answer: the kernel accepts connections for a listening process that is stopped
(SIGSTOP, swapped out, a hung VM) or that is something else, and a gRPC client then waits on its channel for good.
So the client's half of HTTP/2's connection preface (RFC 9113 3.4) and an empty SETTINGS frame are sent; a gRPC
server answers with its own SETTINGS frame at once (9-byte header: 3 bytes length, 1 byte type). Plain sockets,
no gRPC library: a probe must not share the state of the client it judges.
"""

from __future__ import annotations

import socket
from typing import NamedTuple

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
SETTINGS_FRAME = 4


class Silence(NamedTuple):
    """Why no gRPC answer came: `connected` says whether something listens there at all."""

    connected: bool
    why: str  # "Connection refused", "no HTTP/2 answer within 3 s", "it closed the connection", ...


def grpc_silence(host: str, port: int, timeout: float) -> Silence | None:
    """None if a gRPC server answers at host:port within `timeout` seconds (each of connect and answer)."""
    try:
        connection = socket.create_connection((host, port), timeout=timeout)
    except OSError as error:
        return Silence(False, str(error.strerror or error))
    header = b""
    with connection:
        try:
            connection.sendall(HTTP2_PREFACE)
            while len(header) < 9:
                chunk = connection.recv(9 - len(header))
                if not chunk:
                    break
                header += chunk
        except TimeoutError:
            return Silence(True, f"no HTTP/2 answer within {timeout:g} s")
        except OSError as error:
            return Silence(True, str(error.strerror or error))
    if not header:
        return Silence(True, "it closed the connection")
    if len(header) < 9 or header[3] != SETTINGS_FRAME:
        said = header.decode("ascii", "replace").splitlines()[0].strip()
        return Silence(True, f"it answered {said!r}, not HTTP/2")
    return None


def grpc_problem(host: str, port: int, timeout: float, otherwise: str) -> str | None:
    """`grpc_silence` in words: None if it answers; else `cannot connect to host:port within T s (why)`, or
    `something listens on host:port but <otherwise> (why)` (`otherwise`: "it is not a tf.data service dispatcher")."""
    silence = grpc_silence(host, port, timeout)
    if silence is None:
        return None
    if not silence.connected:
        return f"cannot connect to {host}:{port} within {timeout:g} s ({silence.why})"
    return f"something listens on {host}:{port} but {otherwise} ({silence.why})"
