"""Every use of Hydra's private API (`hydra._internal`, a `JobReturn`'s raw value), in one place, so a Hydra
upgrade is checked here.

Checked against hydra-core 1.3.2 and 1.3.8 (pyproject.toml pins `>=1.3.2,<1.4`). Each function names what it
borrows and why tfhydra cannot do without it; tests/structure/test_imports.py fails on `hydra._internal` anywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def parse_command_line(argv: Sequence[str]):
    """Hydra's own argument parser (`hydra._internal.utils.get_args_parser`): the pre-flight must split the
    flags from the overrides exactly as `@hydra.main` will. Returns (namespace, unknown arguments)."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser().parse_known_args(list(argv))


def split_sweep(parsed_overrides: list) -> list[list[list[str]]]:
    """The basic sweeper's expansion of a sweep's overrides into batches of jobs
    (`BasicSweeper.split_arguments`): the pre-flight and the summary must list the jobs it will run.
    Raises for glob() (it needs the config loader)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return BasicSweeper.split_arguments(parsed_overrides, None)


def apply_overrides(parsed_overrides: list, cfg: Any) -> None:
    """Apply key=value overrides to a composed config in place, as Hydra's compose does after the defaults list
    (`ConfigLoaderImpl._apply_overrides_to_config`): one composition per set of group choices instead of two
    per job in the pre-flight."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    ConfigLoaderImpl._apply_overrides_to_config(parsed_overrides, cfg)


def locate(path: str) -> Any:
    """The object a `_target_` names, imported as `hydra.utils.instantiate` will (`hydra._internal.utils._locate`):
    the plan checks that it imports before anything trains."""
    from hydra._internal.utils import _locate

    return _locate(path)


def basic_sweeper(max_batch_size: int | None, params: dict | None) -> Any:
    """Hydra's own basic sweeper (`hydra._internal.core_plugins.basic_sweeper.BasicSweeper`): tfhydra's default
    sweeper (hydra_plugins/tfhydra_basic/) hands a sweep without `sweep.promote` to it unchanged."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return BasicSweeper(max_batch_size=max_batch_size, params=params)


def job_return_value(returned: Any) -> Any:
    """What a job returned or raised (`JobReturn._return_value`): the public `return_value` re-raises a failed
    job's exception, and a launcher or the search must read it without raising."""
    return getattr(returned, "_return_value", None)


def set_job_return_value(returned: Any, value: Any) -> None:
    """Replace what a job returned (`JobReturn._return_value`): a worker sends a failure back as its one line, since
    the exception itself may not pickle."""
    returned._return_value = value
