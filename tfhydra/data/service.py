"""TensorFlow's tf.data service, for when one host's CPUs cannot decode as fast as its accelerators train.

`data.service.address=grpc://host:port` sends the training pipeline (read, decode, cache, shuffle, the float
scaling, batching) to the service's workers; the trainer receives batches. `processing_mode`:
`distributed_epoch` splits each epoch's shards between the workers, so every training example is seen once
per epoch; `parallel_epochs` has each worker run whole epochs, and the trainer takes an epoch's worth of
examples from all of them. Batches are split into examples and batched again on the trainer, so an epoch
keeps the steps the run planned whatever the number of workers (each worker's last batch is partial).

Start TensorFlow's own servers with this module (docs/distribute.md has SLURM and Kubernetes recipes):
    python -m tfhydra.data.service dispatcher --port 5050
    python -m tfhydra.data.service worker --port 5051 --dispatcher host:5050 [--host <this worker's name>]
Workers must reach the data the run names (the same paths, or gs:// ...).
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlparse

from tfhydra.config.errors import ConfigError
from tfhydra.platform.grpc_probe import grpc_problem

CONNECT_TIMEOUT_S = 5  # an unreachable dispatcher fails the run in seconds, not after gRPC's long retries
MODES = ("distributed_epoch", "parallel_epochs")


def dispatcher_host_port(address) -> tuple[str, int]:
    """`grpc://host:port` (or `host:port`) -> (host, port); anything else (a list or a number too: found by the
    pre-flight property) is the key's one-line error."""
    try:  # urlparse itself refuses some hosts, such as an empty bracketed one ('[]')
        parsed = urlparse(address if "://" in address else f"grpc://{address}") if isinstance(address, str) else None
        port = parsed.port if parsed else None
    except ValueError:
        parsed, port = None, None
    if parsed is None or parsed.scheme != "grpc" or not parsed.hostname or port is None:
        raise ConfigError(
            "data.service.address",
            address,
            "grpc://host:port of a tf.data service dispatcher",
            "not a grpc://host:port address",
        )
    return parsed.hostname, port


def probe(host: str, port: int, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """None if a gRPC server answers at host:port within `timeout` seconds (tfhydra/platform/grpc_probe.py: a TCP
    connect alone is not an answer), else what is wrong, in words."""
    return grpc_problem(host, port, timeout, "it is not a tf.data service dispatcher")


def check_reachable(address: str) -> None:
    """Reach the dispatcher once and hear a gRPC answer, so a wrong address is one line within seconds: a refused
    or unreachable port, and a port where something else listens (a web server, a silent one)."""
    host, port = dispatcher_host_port(address)
    problem = probe(host, port)
    if problem:
        raise ConfigError(
            "data.service.address",
            address,
            "the address of a running tf.data service dispatcher "
            "(python -m tfhydra.data.service dispatcher --port <port>)",
            problem,
        )


def distribute(dataset, cfg_service, batch_size: int, size: int):
    """The unbatched training stream of `size` examples, produced by the service's workers in batches."""
    import tensorflow as tf

    address = cfg_service.address
    check_reachable(address)
    host, port = dispatcher_host_port(address)
    served = (
        dataset.batch(batch_size)
        .apply(
            tf.data.experimental.service.distribute(
                processing_mode=cfg_service.processing_mode, service=f"grpc://{host}:{port}"
            )
        )
        .unbatch()
    )
    if cfg_service.processing_mode == "parallel_epochs":  # every worker yields a whole epoch: take one epoch's worth
        served = served.take(size)
    return served.apply(tf.data.experimental.assert_cardinality(size))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tfhydra.data.service",
        description="Start a tf.data service dispatcher or worker (TensorFlow's own).",
    )
    parser.add_argument("role", choices=("dispatcher", "worker"))
    parser.add_argument("--port", type=int, required=True, help="the port this server listens on")
    parser.add_argument("--dispatcher", help="worker: the dispatcher's host:port")
    parser.add_argument(
        "--host", default="localhost", help="worker: the name the trainers reach this worker by (default localhost)"
    )
    parser.add_argument("--work-dir", default=None, help="dispatcher: a directory for its journal (fault tolerance)")
    args = parser.parse_args(argv)
    import tensorflow as tf

    service = tf.data.experimental.service
    if args.role == "dispatcher":
        config = service.DispatcherConfig(
            port=args.port, work_dir=args.work_dir, fault_tolerant_mode=args.work_dir is not None
        )
        server = service.DispatchServer(config)
    else:
        if not args.dispatcher:
            print("Error: --dispatcher=None: a worker needs its dispatcher; accepted: host:port", file=sys.stderr)
            return 2
        dispatcher = args.dispatcher.split("://", 1)[-1]
        server = service.WorkerServer(
            service.WorkerConfig(
                dispatcher_address=dispatcher, port=args.port, worker_address=f"{args.host}:{args.port}"
            )
        )
    print(f"tf.data service {args.role} listening on port {args.port}", flush=True)
    server.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
