"""Every use of Hydra's private API (`hydra._internal`, a `JobReturn`'s raw value), and every public call that
Hydra 1.3 and 1.4 (OmegaConf 2.3 and 2.4) spell differently, in one place, so a Hydra upgrade is checked here.

Checked against hydra-core 1.3.2, 1.3.8 and 1.4.0rc3 with OmegaConf 2.3 and 2.4 (pyproject.toml: `>=1.3.2,<1.5`;
docs/design.md, "Hydra 1.3 and 1.4"). Each function names what it borrows and why tfhydra cannot do without it;
tests/structure/test_imports.py fails on `hydra._internal` anywhere else.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# The version_base tfhydra's configs are written for. Hydra 1.4 deprecates the argument (removed in 1.5) and only
# records it: its behaviour is what 1.3 does for version_base 1.2 and later.
VERSION_BASE = "1.3"


def hydra_line() -> tuple[int, int]:
    """(major, minor) of the installed hydra-core: 1.4 from "1.4.0rc3"."""
    from hydra import __version__

    major, minor = __version__.split(".")[:2]
    return int(major), int(minor)


def version_base() -> dict[str, str]:
    """The `version_base` keyword for `hydra.main` and `initialize_config_dir`: "1.3" on Hydra 1.3 (without it
    1.3 warns and falls back to 1.1's defaults), nothing on 1.4 (which warns when it is given)."""
    return {"version_base": VERSION_BASE} if hydra_line() < (1, 4) else {}


def initialize(config_dir: Any):
    """`hydra.initialize_config_dir` on `config_dir` (resolved), with the version_base of this Hydra."""
    from pathlib import Path

    from hydra import initialize_config_dir

    return initialize_config_dir(config_dir=str(Path(config_dir).resolve()), **version_base())


def execution_whitelist(targets: Sequence[str] | None, keyword: str = "_execution_whitelist_") -> dict[str, Any]:
    """The execution whitelist Hydra 1.4 asks of `instantiate` (`_execution_whitelist_`) and `hydra.main`
    (`execution_whitelist`): exactly `targets`, the `_target_`s of a config that came through the trust layer
    (tfhydra/trust/: a file read back names only what the user's own configs name). Nothing on Hydra 1.3, which
    has no whitelist (its `instantiate` would pass the keyword to the target), nor for `targets=None` (not known:
    Hydra 1.4 then warns if it instantiates anything)."""
    import hydra.utils

    if targets is None or not hasattr(hydra.utils, "execution_whitelist"):
        return {}
    return {keyword: sorted(set(targets))}


def instantiate_partial(node: Any, targets: Sequence[str]) -> functools.partial:
    """`hydra.utils.instantiate(node, _partial_=True, _convert_="all")` as a plain `functools.partial`, which
    tfhydra calls with its context (a DataSpec, a model). Hydra 1.4 checks every name the node calls against
    `targets`, its execution whitelist, here. Its own partial would also hold what the call returns to that list,
    a check for results Hydra goes on to call: a user's model builder returns a Keras model, which is callable and
    named nowhere in a config (`tf_keras.src.engine.functional.Functional`), and tfhydra uses it, not the config."""
    from hydra.utils import instantiate

    built = instantiate(node, _partial_=True, _convert_="all", **execution_whitelist(targets))
    return functools.partial(built.func, *built.args, **built.keywords)


def register_resolver(name: str, resolver: Callable[..., Any]) -> None:
    """Register an OmegaConf resolver: `register_resolver` on OmegaConf 2.4 (`register_new_resolver`, deprecated
    there, is 2.3's name; 2.3's `register_resolver` is the old deprecated one, without `replace`)."""
    import inspect

    from omegaconf import OmegaConf

    if "replace" in inspect.signature(OmegaConf.register_resolver).parameters:
        OmegaConf.register_resolver(name, resolver)
    else:
        OmegaConf.register_new_resolver(name, resolver)


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


def config_groups(loader: Any) -> dict[str, list[str]]:
    """Each config group on `loader`'s search path (Hydra's and its plugins' included) and its options, listed from
    the loader's own repository (`ConfigLoaderImpl.repository`). The public `list_groups`/`get_group_options` wrap
    that repository in a `CachingConfigRepository` per call, which deep-copies it whole, every ConfigStore schema node
    included: walking tfhydra's 30 groups that way was 61 copies, 2.4 s on 2 loaded cores, paid by every
    tfhydra-evaluate and tfhydra-predict. Listing reads the sources and changes nothing, so no copy is needed."""
    from hydra.core.object_type import ObjectType

    repository = getattr(loader, "repository", None)
    groups = repository.get_group_options if repository is not None else loader.get_group_options
    options: dict[str, list[str]] = {}
    pending = [""]
    while pending:
        parent = pending.pop()
        for name in groups(parent, ObjectType.GROUP):
            group = f"{parent}/{name}" if parent else name
            options[group] = sorted(groups(group, ObjectType.CONFIG))
            pending.append(group)
    return options


@contextlib.contextmanager
def mode_from_preflight(mode: Any) -> Iterator[None]:
    """Inside the block, Hydra 1.3's `hydra.main` takes the run mode (`hydra.mode`: None, RUN or MULTIRUN) from the
    pre-flight's composition instead of composing the whole config once more to read that one key (`Hydra.get_mode`,
    which `_run_hydra` calls before every run and sweep: 0.19-0.26 s on 2 quiet cores, more beside TensorFlow's
    import, with which it shares the GIL). The answer is the same: it composes the same config (search path, name
    and overrides) and returns `cfg.hydra.mode`. Hydra 1.4 reads the key without composing (from the overrides, then
    the primary config): left alone there."""
    from hydra._internal.hydra import Hydra

    original = getattr(Hydra, "get_mode", None)
    if original is None or hydra_line() >= (1, 4):
        yield
        return
    Hydra.get_mode = lambda self, *args, **kwargs: mode  # type: ignore[method-assign]  # for the block only
    try:
        yield
    finally:
        Hydra.get_mode = original  # type: ignore[method-assign]
