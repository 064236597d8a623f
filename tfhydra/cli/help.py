"""`tfhydra-train --help` (and `python train.py --help`): what the command does, the config groups with their
options, the common keys with their defaults and descriptions; `--help SECTION` every key under a section.

One source: the descriptions are the YAML comments of `conf/` (`batch_size: 32  # GLOBAL batch size ...`, an option
file's header comment, the defaults list's comment for a group), the same text a user reads in the files, so help
and config cannot drift; tests/cli/test_help.py fails on a key without one. Printed before Hydra starts (Hydra's own
page, `--hydra-help`, cannot read comments), without TensorFlow.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from omegaconf import DictConfig, ListConfig, OmegaConf

from tfhydra.platform.private_api import config_node, node_value

# The keys the page shows without a section (the rest: `--help SECTION`). Which keys are common is a choice of
# this page; their defaults and descriptions come from conf/.
COMMON_KEYS = (
    "data.batch_size",
    "data.fraction",
    "data.cache",
    "data.augment",
    "optimizer.lr",
    "optimizer.schedule.name",
    "trainer.epochs",
    "trainer.seed",
    "trainer.loop",
    "trainer.monitor",
    "trainer.clip_norm",
    "trainer.early_stopping.patience",
    "logging.images_freq",
    "export.formats",
)
SKIPPED_SECTIONS = ("hydra",)  # Hydra's own: `--hydra-help`, `--cfg hydra`
_KEY = re.compile(r"^(\s*)([A-Za-z_][\w]*):(.*)$")
_GROUP = re.compile(r"^\s*-\s*(?:override\s+)?([\w/]+):\s*([^#]*?)\s*(?:#\s?(.*))?$")


@dataclass(frozen=True)
class Described:
    key: str
    kind: str
    default: str
    description: str


def comments(path: Path, package: str = "") -> dict[str, str]:
    """{dotted key: its trailing comment} of one YAML file; a file that says `# @package _global_` is at the root,
    any other option file under its group's package."""
    text = path.read_text(encoding="utf-8")
    if "# @package _global_" in text:
        package = ""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        match = _KEY.match(line)
        if match is None or match[2] == "defaults":
            continue
        indent, key, rest = len(match[1]), match[2], match[3]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([p for p in (package, *(k for _, k in stack)) if p] + [key])
        value, _, comment = _split_comment(rest)
        if comment:
            found[dotted] = comment
        if not value:  # a section: its keys follow, deeper
            stack.append((indent, key))
    return found


def _split_comment(rest: str) -> tuple[str, str, str]:
    """`value  # comment` -> (value, '#', comment); a `#` inside quotes is part of the value."""
    quote = None
    for i, char in enumerate(rest):
        if char in "'\"" and quote in (None, char):
            quote = None if quote else char
        elif char == "#" and quote is None and (i == 0 or rest[i - 1].isspace()):
            return rest[:i].strip(), "#", rest[i + 1 :].strip()
    return rest.strip(), "", ""


def header(path: Path, limit: int = 110) -> str:
    """An option file's header comment, on one line, cut at a word near `limit`."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            lines.append(line.lstrip("# ").strip())
    text = " ".join(lines)
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def config_dirs(config_dir: Path) -> list[Path]:
    from tfhydra.config.project import CONFIG_DIR

    return list(dict.fromkeys([Path(config_dir), CONFIG_DIR]))


def option_file(dirs: list[Path], group: str, option: str) -> Path | None:
    return next((d / group / f"{option}.yaml" for d in dirs if (d / group / f"{option}.yaml").is_file()), None)


def own_keys(path: Path | None) -> list[str]:
    """The top-level keys an option's file sets itself (`name`, `path`, `label`, ... of data=csv), in its order:
    read as `comments` reads the file, line by line (the page parses no config file)."""
    if path is None:
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [m[2] for m in map(_KEY.match, lines) if m is not None and not m[1] and m[2] != "defaults"]


def descriptions(dirs: list[Path], choices: dict) -> dict[str, str]:
    """Every key's description for a run with these group `choices`: the chosen options' files first, then the
    primary configs (a project's config.yaml, tfhydra.yaml), then any option file of the key's group."""
    found: dict[str, str] = {}
    for group, chosen in choices.items():
        for option in chosen if isinstance(chosen, (list, ListConfig)) else [chosen]:
            path = option_file(dirs, group, str(option)) if option and not group.startswith("hydra") else None
            if path is not None:
                found = {**comments(path, group.replace("/", ".")), **found}
    for d in dirs:
        for name in ("config.yaml", "tfhydra.yaml"):
            if (d / name).is_file():
                found = {**comments(d / name), **found}
    for d in dirs:  # options a list group (logger) or an option's own defaults list (prune_quantize) brings in
        for path in sorted(d.glob("*/*.yaml")):
            found = {**comments(path, path.parent.name), **found}
            for option, key in _INCLUDED.findall(path.read_text(encoding="utf-8")):  # `- transformer@tokens`
                if (path.parent / f"{option}.yaml").is_file():
                    found = {**comments(path.parent / f"{option}.yaml", f"{path.parent.name}.{key}"), **found}
    return found


# A defaults-list entry that puts another option of the same group under a key of this one (model=auto's tokens)
_INCLUDED = re.compile(r"^\s*-\s*(\w+)@(?!_here_|_global_)(\w+)\s*(?:#.*)?$", re.MULTILINE)


def group_descriptions(dirs: list[Path]) -> dict[str, str]:
    """{group: the comment of its line in a defaults list}."""
    found: dict[str, str] = {}
    for d in reversed(dirs):
        for name in ("tfhydra.yaml", "config.yaml"):
            if (d / name).is_file():
                for line in (d / name).read_text(encoding="utf-8").splitlines():
                    match = _GROUP.match(line)
                    if match and match[3]:
                        found[match[1]] = match[3]
    return found


def leaves(node, prefix: str = ""):
    """(dotted key, value) of every leaf, values unresolved (`${trainer.monitor}` shows as written)."""
    for key in node:
        path = f"{prefix}.{key}" if prefix else str(key)
        child = config_node(node, key)
        if isinstance(child, DictConfig) and len(child) and "_target_" not in child:
            yield from leaves(child, path)
        else:
            yield (
                path,
                node_value(child)
                if not isinstance(child, (DictConfig, ListConfig))
                else OmegaConf.to_container(child, resolve=False),
            )


def described_keys(cfg: DictConfig, dirs: list[Path]) -> list[Described]:
    choices = cast(dict, OmegaConf.to_container(cfg.hydra.runtime.choices)) if "hydra" in cfg else {}
    found = descriptions(dirs, choices)
    keys = []
    for key, value in leaves(cfg):
        if key.split(".")[0] in SKIPPED_SECTIONS:
            continue
        description = found.get(key, "")
        if not description and key.endswith(".name") and key.count(".") == 1:  # the option's own name
            description = f"the {key.split('.')[0]} option (set it with {key.split('.')[0]}=...)"
        kind = "null" if value is None else "string" if isinstance(value, str) else type(value).__name__  # a choice too
        keys.append(Described(key, kind, _show(value), description))
    return keys


def undescribed(cfg: DictConfig, dirs: list[Path]) -> list[str]:
    """The keys of a composed config that no comment in conf/ describes (tests/cli/test_help.py keeps this empty)."""
    return [k.key for k in described_keys(cfg, dirs) if not k.description]


def _show(value) -> str:
    import json

    return "null" if value is None else json.dumps(value) if isinstance(value, (list, dict, bool)) else str(value)


def help_page(cfg: DictConfig, dirs: list[Path], command: str) -> str:
    keys = {k.key: k for k in described_keys(cfg, dirs)}
    groups = group_descriptions(dirs)
    choices = cast(dict, OmegaConf.to_container(cfg.hydra.runtime.choices))
    lines = [
        f"{command}: train a TensorFlow (tf_keras) model on a Hydra-composed config; writes a run directory",
        "(checkpoints, TensorBoard logs, exports, metrics.json) under outputs/.",
        "",
        f"Usage: {command} [group=option ...] [key=value ...]       one run",
        f"       {command} -m key=a,b [group=x,y ...]              a sweep: one job per combination",
        f"       {command} --help SECTION [group=option ...]       every key under SECTION (e.g. data, "
        "optimizer.schedule):",
        "                                                     type, default, description",
        f"       {command} --cfg job | --info | --hydra-help | --version",
        "",
        "== Config groups (group=option) ==",
    ]
    for group in sorted(groups):
        if group.startswith("hydra") or not any((d / group).is_dir() for d in dirs):
            continue
        lines += [f"{group}: {groups[group]}", *option_lines(dirs, group, choices.get(group), "default")]
    lines += ["", "== Common keys (key=value; the default after =) =="]
    common = [(f"{name}={keys[name].default}", keys[name].description) for name in COMMON_KEYS if name in keys]
    width = max((len(setting) for setting, _ in common), default=0)
    lines += [f"  {setting:<{width}}  {description}" for setting, description in common]
    lines += [
        "",
        f"Every key of a section: {command} --help data (or trainer, optimizer, logging, export ...).",
        "Docs: README.md and docs/ (training.md, data.md, models.md, sweeps.md, terminal.md).",
    ]
    return "\n".join(lines)


def option_lines(dirs: list[Path], group: str, chosen, mark: str) -> list[str]:
    """A config group's options, one a line with its file's header comment, the chosen one(s) marked."""
    lines = []
    for option in sorted({p.stem for d in dirs if (d / group).is_dir() for p in (d / group).glob("*.yaml")}):
        marked = f" ({mark})" if option == chosen or (isinstance(chosen, list) and option in chosen) else ""
        path = option_file(dirs, group, option)
        assert path is not None  # the options are the files listed above
        lines.append(f"    {option + marked:<26} {header(path)}")
    return lines


def keys_page(cfg: DictConfig, dirs: list[Path], sections: list[str]) -> str:
    """Every key under each section; a section that is a config group (`--help task`) first lists its options,
    since its keys are the chosen option's (another's: `--help task task=regression`)."""
    from tfhydra.config.errors import ConfigError, suggestion

    described = described_keys(cfg, dirs)
    choices = cast(dict, OmegaConf.to_container(cfg.hydra.runtime.choices)) if "hydra" in cfg else {}
    lines = []
    for section in sections:
        if section in choices and not section.startswith("hydra") and any((d / section).is_dir() for d in dirs):
            lines += [
                f"{section} options ({section}=<option>; the keys below are the chosen one's, another's: "
                f"--help {section} {section}=<option>):",
                *option_lines(dirs, section, choices[section], "chosen"),
            ]
        under = [k for k in described if k.key == section or k.key.startswith(section + ".")]
        if not under:
            tops = sorted({k.key.rsplit(".", 1)[0] for k in described} | {k.key.split(".")[0] for k in described})
            raise ConfigError(
                f"--help {section}",
                None,
                "a section or key of the config, e.g. data, trainer, optimizer.schedule",
                f"no such section{suggestion(section, tops)}",
            )
        if section in choices:  # the chosen option's own keys first, in its file's order; then the group's shared ones
            own = own_keys(option_file(dirs, section, str(choices[section])))
            rank = {key: i for i, key in enumerate(own)}
            under.sort(key=lambda k: rank.get(k.key[len(section) + 1 :].split(".")[0], len(rank)))
        width, shown = max(len(k.key) for k in under), min(24, max(len(k.default) for k in under))
        lines += [f"{k.key:<{width}}  {k.kind:<6}  {k.default:<{shown}}  {k.description or '-'}" for k in under]
    return "\n".join(lines)


def print_help(config_dir: Path, argv: list[str], command: str) -> int:
    """The page for `--help` (with SECTION arguments: their keys); 0, or 1 with one `Error:` line."""
    from hydra import compose

    from tfhydra.config.errors import ConfigError
    from tfhydra.config.hydra_api import initialize

    words = [a for a in argv if a not in ("--help", "-h")]
    sections = [w for w in words if "=" not in w and not w.startswith("-")]
    overrides = [w for w in words if "=" in w]
    dirs = config_dirs(config_dir)
    try:
        from tfhydra.config.composition import composition_errors

        groups = sorted({p.name for d in dirs for p in d.iterdir() if p.is_dir()})
        with (
            initialize(config_dir),
            composition_errors(overrides, groups),
        ):
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
        print(keys_page(cfg, dirs, sections) if sections else help_page(cfg, dirs, command))
    except ConfigError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `--help | head`: the reader has what it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
