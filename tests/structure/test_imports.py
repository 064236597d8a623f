"""The import rules of the house (docs/design.md, "The map"), read from the source.

A module's room is its folder under tfhydra/ (a top-level module is a room of its own), and a room's layer is
the layer of its folder. From the top: the public faces (the top-level modules and the predict command), the
commands (cli/, runner/, sweep/, launch/), the group rooms (one per config group: data/, model/, ...) and the
ground floor (config/, platform/, trust/, record/). An import never runs back up a layer; group rooms never
import each other; the runner and the sweep room do not import each other; the sweep room never imports the
launch room (the run plan reads the sweep section's checks, sweep/checks.py, and nothing else of the sweep room);
and what the run plan reads must not import TensorFlow. A new folder must say which layer it is
in (LAYERS), so a room cannot be added without a place in the order.

An import is every import line (lazy ones inside functions too), and an import by string (`import_module(
"tfhydra.x.y")`, `preload_job("tfhydra.runner.job")`); a circle counts the package faces Python runs on the way
(importing `tfhydra.trust.readers` runs `tfhydra/trust/__init__.py`). A face below `tfhydra/__init__.py` defines
nothing and imports no TensorFlow; every registry names the modules of its room that fill it.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tfhydra"

# The layers, top to bottom, each the folders it holds. Top-level modules are faces (FACES) wherever they are.
LAYERS = {
    "faces": {"predict", "comparison"},
    "commands": {"cli", "runner", "sweep", "launch"},
    "groups": {
        "data",
        "task",
        "model",
        "optimizer",
        "precision",
        "strategy",
        "compression",
        "trainer",
        "export",
        "logger",
    },
    "ground": {"config", "platform", "trust", "record"},
}
ORDER = list(LAYERS)
FACES = "faces"


def folders() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py") if p.parent.name != "conf"}


def room_of(module: str) -> str:
    """`tfhydra.data.pipeline` -> `data`; `tfhydra.api` -> `api`; `tfhydra` -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(room: str) -> str:
    """A folder's layer (LAYERS); a top-level module is a face."""
    for layer, rooms in LAYERS.items():
        if room in rooms:
            return layer
    if (PACKAGE / f"{room}.py").is_file() or room == "__init__":
        return FACES
    raise KeyError(f"tfhydra/{room}/ is in no layer of LAYERS")


def imports_of(path: Path) -> set[str]:
    """Every tfhydra module `path` imports, at any depth of the file (lazy imports inside functions count)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                package = module.split(".")[: len(module.split(".")) - node.level + (path.name == "__init__.py")]
                base = ".".join([*package, base] if base else package)
            found |= {f"{base}.{alias.name}" if is_submodule(f"{base}.{alias.name}") else base for alias in node.names}
    found |= string_imports(tree)
    return {name for name in found if name == "tfhydra" or name.startswith("tfhydra.")}


# Functions that import the module a string names: a call of one with a literal tfhydra path is an import arrow.
STRING_IMPORTERS = {"import_module", "__import__", "preload_job"}


def string_imports(tree: ast.AST) -> set[str]:
    """The tfhydra modules imported by string: `importlib.import_module("tfhydra.x.y")`, `__import__(...)`,
    `preload_job("tfhydra.runner.job")`, and an f-string's literal start (`import_module(f"tfhydra.data.{name}")`
    names the package `tfhydra.data`), each read as the longest module path its literal spells."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        literal = literal_start(node.args[0])
        if name in STRING_IMPORTERS and literal.startswith("tfhydra."):
            parts = literal.split(".")
            while len(parts) > 1 and not (parts[-1].isidentifier() and is_submodule(".".join(parts))):
                parts.pop()
            found.add(".".join(parts))
    return found


def literal_start(node: ast.expr) -> str:
    """The text a string expression is known to start with: a literal whole, an f-string up to its first field."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        start = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                break
            start += part.value
        return start
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return literal_start(node.left)
    return ""


def is_submodule(name: str) -> bool:
    """`tfhydra.sweep.checks` names a module of the package (a file or a folder)."""
    if not name.startswith("tfhydra."):
        return False
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def lazy_targets(path: Path) -> set[str]:
    """Modules a package names in strings for PEP 562 lazy lookup (`"tfhydra.compression.schemes"`)."""
    tree = ast.parse(path.read_text())
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("tfhydra.")
        and all(part.isidentifier() for part in node.value.split("."))
    }


def violations(files: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imported in files.items():
        room = room_of(module)
        for target in sorted(imported):
            other = room_of(target)
            if other == room:
                continue
            here, there = layer_of(room), layer_of(other)
            if ORDER.index(there) < ORDER.index(here):
                found.append(f"{module} imports {target}: an import runs back up ({here} -> {there})")
            elif here == there == "groups":
                found.append(f"{module} imports {target}: group rooms never import each other")
            elif (room, other) == ("sweep", "runner") or (
                (room, other) == ("runner", "sweep") and target not in ("tfhydra.sweep.checks", "tfhydra.sweep.schemas")
            ):
                found.append(
                    f"{module} imports {target}: the runner and the sweep room must not import each other "
                    "(the run plan reads sweep/checks.py and sweep/schemas.py alone)"
                )
            elif (room, other) == ("sweep", "launch"):
                found.append(f"{module} imports {target}: the sweep room never imports the launch room")
    return sorted(found)


def tfhydra_files() -> dict[str, set[str]]:
    files = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        files[module] = imports_of(path) | (lazy_targets(path) if path.name == "__init__.py" else set())
    return files


def test_every_folder_is_in_a_layer_and_few_modules_stand_at_the_top():
    declared = set().union(*LAYERS.values())
    assert folders() - declared == set(), "a new folder: give it a layer in LAYERS (and docs/design.md)"
    assert declared - folders() == set()
    assert len(list(PACKAGE.glob("*.py"))) <= 8  # the public faces only


def test_imports_point_one_way():
    assert violations(tfhydra_files()) == []


@pytest.mark.parametrize(
    "module,target,rule",
    [
        ("tfhydra.data.pipeline", "tfhydra.cli.preflight", "an import runs back up (groups -> commands)"),
        ("tfhydra.model.seed", "tfhydra.data", "group rooms never import each other"),
        ("tfhydra.compression.plan", "tfhydra.runner.job", "an import runs back up (groups -> commands)"),
        ("tfhydra.config.contracts", "tfhydra.model", "an import runs back up (ground -> groups)"),
        ("tfhydra.record.lifecycle", "tfhydra.api", "an import runs back up (ground -> faces)"),
        ("tfhydra.runner.job", "tfhydra.sweep.trial", "the runner and the sweep room must not import each other"),
        ("tfhydra.sweep.trial", "tfhydra.runner.phase", "the runner and the sweep room must not import each other"),
        ("tfhydra.sweep.callback", "tfhydra.launch.workers", "the sweep room never imports the launch room"),
    ],
)
def test_the_rule_fails_when_a_room_imports_what_it_must_not(module, target, rule):
    files = tfhydra_files()
    files[module] = files[module] | {target}
    assert any(rule in v and v.startswith(f"{module} imports {target}") for v in violations(files))


# Two folders that import each other, each with its reason (keep this short): the ground floor's rooms may
# import each other, but a tie both ways is a room that wants splitting.
TIES = {
    ("record", "trust"): "the record is read through trust's bounded readers, and trust asks a run's record "
    "whether it completed before anything uses the run"
}


def ties(files: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The pairs of folders (sorted) that import each other."""
    edges = {(room_of(m), room_of(t)) for m, imported in files.items() for t in imported}
    return {tuple(sorted((a, b))) for a, b in edges if a != b and (b, a) in edges}


def test_no_two_folders_import_each_other():
    assert ties(tfhydra_files()) - set(TIES) == set()


def test_the_tie_rule_sees_a_tie():
    files = tfhydra_files()
    files["tfhydra.platform.runtime"] = files["tfhydra.platform.runtime"] | {"tfhydra.config.errors"}
    files["tfhydra.config.schema"] = files["tfhydra.config.schema"] | {"tfhydra.platform.runtime"}
    assert ("config", "platform") in ties(files)


def test_a_folder_without_a_layer_is_refused():
    with pytest.raises(KeyError, match="tfhydra/newroom/ is in no layer"):
        layer_of("newroom")


def test_every_package_is_in_the_wheel():
    """pyproject.toml lists the packages the wheel carries: a room moved into a new package must be listed."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {".".join(init.parent.relative_to(ROOT).parts) for init in PACKAGE.rglob("__init__.py")}
    assert packages - listed == set()


def test_the_run_plan_imports_no_tensorflow():
    """The pre-flight plans every job before TensorFlow is loaded: plan.py and every check it gathers."""
    code = (
        "import sys, tfhydra; from tfhydra.runner.plan import plan_run; import tfhydra.record, tfhydra.record.rundir, "
        "tfhydra.config.contracts; bad = [m for m in ('tensorflow', 'tf_keras', 'keras') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


COMMAND_LINE = (
    "tfhydra.cli.preflight",
    "tfhydra.config.composition",
    "tfhydra.sweep",
    "tfhydra.launch",
    "tfhydra.cli.console",
    "tfhydra.platform.startup",
    "tfhydra.api",
    "tfhydra.notebook",
    "tfhydra.runner.job",
    "tensorflow",
    "tf_keras",
)


def loaded_after(statement: str) -> list[str]:
    """The command-line modules (and TensorFlow) a fresh interpreter has loaded after `statement`."""
    code = (
        f"import sys; {statement}; names = {COMMAND_LINE!r}; "
        "print(sorted(m for m in sys.modules if m in names or m.startswith(tuple(n + '.' for n in names))))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout)  # noqa: S307  (our own print of a list of names)


def test_importing_the_record_loads_no_command_line():
    """The ground floor stays light: `import tfhydra.record` (a tool reading metrics.json) sets the Keras
    environment through tfhydra/platform/keras_env.py, not by loading the pre-flight, the sweep room or TensorFlow.
    (Hydra itself is loaded: `ConfigError` is Hydra's `CompactHydraException`, so Hydra prints it in one line.)"""
    assert loaded_after("import tfhydra.record, tfhydra.record.rundir, tfhydra.record.lifecycle") == []


def test_importing_tfhydra_loads_its_names_on_first_use():
    assert loaded_after("import tfhydra") == []
    used = loaded_after("import tfhydra; tfhydra.compose, tfhydra.check_command_line")
    assert {"tfhydra.cli.preflight", "tfhydra.api"} <= set(used)


# ---- no circles, small rooms (issue 25) -------------------------------------------------------------------------

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 350, 60
# Modules and functions allowed past the limits, each with its reason (keep this short).
LONG_MODULES: dict[str, str] = {}
LONG_FUNCTIONS: dict[str, str] = {}


def module_graph() -> dict[str, set[str]]:
    """module -> the tfhydra modules it imports, at any depth (lazy imports inside functions count), with
    `from package import name` read as the submodule `package.name` where there is one."""
    modules = set(tfhydra_files())
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [
                    f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                    for alias in node.names
                ]
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    edges.add(name)
        graph[module] = edges | (string_imports(ast.parse(path.read_text())) - {module, "tfhydra"})
    return graph


def through_faces(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """`graph` with the imports Python makes without a line saying so: importing `tfhydra.trust.readers` runs
    `tfhydra/trust/__init__.py` first, so an arrow to a module of a package is also an arrow to the package's face,
    unless the importing module is in that package itself (its face has run before it). tfhydra/__init__.py is
    every module's own package, so it is never such a face."""
    faced = {}
    for module, targets in graph.items():
        edges = set(targets)
        for target in targets:
            parts = target.split(".")
            for depth in range(2, len(parts)):
                package = ".".join(parts[:depth])
                if module != package and not module.startswith(package + "."):
                    edges.add(package)
        faced[module] = edges
    return faced


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_module_imports_itself_through_others():
    """No circle, the package faces a module runs on its way included (a circle through two faces is a module
    that finds the other half-imported, depending on which face a process imports first)."""
    assert circles(through_faces(module_graph())) == []


def test_the_circle_rule_sees_a_circle():
    graph = module_graph()
    graph["tfhydra.record.rundir"] = graph["tfhydra.record.rundir"] | {"tfhydra.record"}  # the face: run_record, rundir
    assert any({"tfhydra.record", "tfhydra.record.rundir"} <= set(circle) for circle in circles(graph))


@pytest.mark.parametrize(
    "planted,members",
    [
        # `from tfhydra.record import x` in trust/ and `from tfhydra.trust import y` in record/
        (
            {"tfhydra.trust.allowlist": "tfhydra.record", "tfhydra.record.run_record": "tfhydra.trust"},
            {"tfhydra.record", "tfhydra.trust", "tfhydra.trust.allowlist"},
        ),
        # no line names a face: trust/allowlist.py reading record/rundir.py runs the record face, which hands on
        # run_record.py, which (planted) reads trust/hdf5.py and so runs the trust face, which hands on allowlist.py
        (
            {"tfhydra.trust.allowlist": "tfhydra.record.rundir", "tfhydra.record.run_record": "tfhydra.trust.hdf5"},
            {"tfhydra.record", "tfhydra.record.run_record", "tfhydra.trust", "tfhydra.trust.allowlist"},
        ),
    ],
)
def test_the_circle_rule_sees_a_circle_through_package_faces(planted, members):
    graph = module_graph()
    for module, target in planted.items():
        graph[module] = graph[module] | {target}
    assert any(members <= set(circle) for circle in circles(through_faces(graph)))


def test_an_import_by_string_is_an_arrow():
    tree = ast.parse(
        "import importlib\n"
        "importlib.import_module('tfhydra.runner.job')\n"
        "def f(family):\n    return importlib.import_module(f'tfhydra.data.{family}')\n"
        "preload_job('tfhydra.runner.job')\n"
        "importlib.import_module('json')\n"
    )
    assert string_imports(tree) == {"tfhydra.runner.job", "tfhydra.data"}
    files = tfhydra_files()
    files["tfhydra.platform.startup"] = files["tfhydra.platform.startup"] | string_imports(tree)
    assert any(v.startswith("tfhydra.platform.startup imports tfhydra.runner.job") for v in violations(files))


def sizes() -> tuple[list[str], list[str]]:
    """Modules over MAX_MODULE_LINES and functions over MAX_FUNCTION_LINES, less the allowlists."""
    modules, functions = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(ROOT))
        source = path.read_text()
        if len(source.splitlines()) > MAX_MODULE_LINES and name not in LONG_MODULES:
            modules.append(f"{name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES and f"{name}:{node.name}" not in LONG_FUNCTIONS:
                    functions.append(f"{name}:{node.name}: {length} lines")
    return modules, functions


def test_modules_and_functions_stay_small():
    assert sizes() == ([], [])


def test_hydras_private_api_is_used_in_one_module():
    users = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if "hydra._internal" in p.read_text())
    assert users == ["tfhydra/config/hydra_api.py"]


# ---- one door for other packages' private API (issue 36 item 6) ---------------------------------------------------

DOORS = {"tfhydra/config/hydra_api.py", "tfhydra/platform/private_api.py"}
PRIVATE_PACKAGES = ("tensorflow", "tf_keras", "keras", "omegaconf", "optuna", "hydra")
# Private names reached outside the doors on purpose, each with its reason (keep this short).
ALLOWED_PRIVATE = {
    "os._exit": "the os module's documented exit without clean-up",
    "atexit._run_exitfuncs": "CPython's own shutdown entry point (startup.py: the fast exit)",
    "self.stop._previous": "tfhydra's own StopOnSignal (trainer/state.py)",
}


def private_reaches(source: str) -> list[str]:
    """Private names of other packages that `source` reaches: an import of `tensorflow.python`, `tf_keras.src`,
    `omegaconf._x`, `hydra._internal` ...; an attribute `x._name` (not `self._name` or `super()._name`: a subclass's
    own state and the Keras hooks it overrides stay with it); a `getattr(x, "_name")`. Names like `_target_` are
    config keys, not private."""
    found = []

    def private(name: str) -> bool:
        return name.startswith("_") and not name.endswith("_")

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                parts = module.split(".")
                if parts[0] in PRIVATE_PACKAGES and (
                    any(private(p) for p in parts[1:]) or "src" in parts[1:2] or parts[:2] == ["tensorflow", "python"]
                ):
                    found.append(f"line {node.lineno}: import {module}")
        elif isinstance(node, ast.Attribute) and (private(node.attr) or node.attr == "__internal__"):
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
                continue
            if ast.unparse(node) not in ALLOWED_PRIVATE:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and private(node.args[1].value)
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_other_packages_private_api_is_reached_through_one_door():
    """TensorFlow's, tf_keras', OmegaConf's and Optuna's private names are reached in tfhydra/platform/private_api.py
    only, Hydra's in tfhydra/config/hydra_api.py only: an upgrade is checked in two files."""
    paths = [*PACKAGE.rglob("*.py"), *(ROOT / "hydra_plugins").rglob("*.py")]
    reaches = {str(p.relative_to(ROOT)): private_reaches(p.read_text()) for p in sorted(paths)}
    assert {name: found for name, found in reaches.items() if found and name not in DOORS} == {}


@pytest.mark.parametrize(
    "line",
    [
        "from tf_keras.src.engine.training import reduce_per_replica",
        "from tensorflow.python.framework import config",
        "import tensorflow.python.framework.config",
        "from omegaconf.basecontainer import BaseContainer; BaseContainer._resolvers",
        "value = cfg._get_node('x')._value()",
        "rate = model.optimizer._learning_rate",
        "built = getattr(optimizer, '_built', False)",
        "import tensorflow as tf; tf.__internal__.tracking.Trackable",
        "from hydra._internal.utils import _locate",
    ],
)
def test_the_door_rule_sees_a_private_reach(line):
    assert private_reaches(line) != []


@pytest.mark.parametrize(
    "line",
    [
        "self._epoch = 0",
        "super()._log_weights(epoch)",
        "cfg.model._target_",
        "os._exit(0)",
        "from tfhydra.config.errors import _show",
    ],
)
def test_the_door_rule_lets_own_names_and_config_keys_pass(line):
    assert private_reaches(line) == []


def test_the_old_flat_paths_import_the_modules_that_hold_their_code_now():
    """User code and saved `_target_`s of the flat layout keep working: the same module object, not a copy."""
    code = (
        "import importlib, tfhydra, tfhydra.config.errors as new\n"
        "from tfhydra.errors import ConfigError\n"
        "from hydra.utils import get_class\n"
        "assert ConfigError is new.ConfigError and importlib.import_module('tfhydra.errors') is new\n"
        "from tfhydra.trust.locks import DirectoryLock\n"
        "assert get_class('tfhydra.dirlock.DirectoryLock') is DirectoryLock\n"
        "import tfhydra.job, tfhydra.runner.job\n"
        "assert tfhydra.job is tfhydra.runner.job\n"
        "try:\n    import tfhydra.no_such_module\nexcept ModuleNotFoundError:\n    print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize(
    "old,new",
    [("tfhydra.errors", "tfhydra.config.errors"), ("tfhydra.launch.launch_errors", "tfhydra.launch.lost_jobs")],
)
def test_an_old_path_warns_once_naming_the_new_one_and_answers_the_same_module(old, new):
    """An old path is deprecated, not copied: the first import says where the module is now and when the old path
    goes, in one DeprecationWarning attributed to the importing line; the module is the one that holds the code,
    and it keeps its own name (its `__spec__`)."""
    import importlib
    import warnings

    import tfhydra

    module = importlib.import_module(new)
    parent, _, name = old.rpartition(".")
    kept = sys.modules.pop(old, None), getattr(sys.modules[parent], name, None)  # as in a fresh process
    if kept[1] is not None:
        delattr(sys.modules[parent], name)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = importlib.import_module(old)
            again = importlib.import_module(old)
    finally:
        sys.modules.pop(old, None)
        vars(sys.modules[parent]).pop(name, None)
        if kept[0] is not None:
            sys.modules[old] = kept[0]
        if kept[1] is not None:
            setattr(sys.modules[parent], name, kept[1])
    assert first is again is module and module.__spec__.name == new
    message = f"{old} is deprecated and will be removed in tfhydra 0.4; import {new} instead"
    assert [(w.category, str(w.message), w.filename) for w in caught] == [(DeprecationWarning, message, __file__)]
    version = tuple(int(part) for part in tfhydra.__version__.split(".")[:2])
    assert version < (0, 4), "tfhydra 0.4 removes the old paths: delete _MOVED from tfhydra/__init__.py"


# ---- faces hand names on, registries know their modules (issue 54) ------------------------------------------------


def face_statements(source: str) -> list[str]:
    """What a package's `__init__.py` holds besides its docstring, imports and `__all__`: a function, a class, any
    other statement (a face hands names on; logic lives in a named module)."""
    found = []
    for index, node in enumerate(ast.parse(source).body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            continue
        found.append(f"line {node.lineno}: {getattr(node, 'name', type(node).__name__)}")
    return found


def test_no_package_face_below_the_public_one_defines_anything():
    faces = sorted(p for p in PACKAGE.rglob("__init__.py") if p != PACKAGE / "__init__.py")
    found = {str(p.relative_to(ROOT)): face_statements(p.read_text()) for p in faces}
    assert {face: statements for face, statements in found.items() if statements} == {}


def test_the_face_rule_sees_what_a_face_must_not_hold():
    source = (
        '"""doc"""\nfrom __future__ import annotations\nimport importlib\nfrom x import y\n__all__ = ["y"]\n'
        "_LAZY = {}\ndef __getattr__(name):\n    pass\nclass Record:\n    pass\n"
    )
    assert face_statements(source) == ["line 6: Assign", "line 7: __getattr__", "line 9: Record"]


def test_importing_every_face_imports_no_tensorflow():
    """A face hands on only names whose modules import no TensorFlow: `import tfhydra.model` (or any room) is cheap,
    and what needs TensorFlow is imported from its module (`from tfhydra.model.build import build_model`)."""
    faces = sorted(".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py"))
    code = (
        f"import sys; import {', '.join(faces)}; "
        "bad = [m for m in ('tensorflow', 'tf_keras', 'keras') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def registry_locations() -> dict[str, list[str]]:
    """`module:GROUP` -> the `locations` of each `Registry(...)` made in tfhydra/ (mmengine's registry: the modules
    whose builders register there, imported on the first lookup); a registry that names none maps to []."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Registry":
                group = ast.literal_eval(node.args[0])
                named = [k.value for k in node.keywords if k.arg == "locations"]
                found[f"{module}:{group}"] = ast.literal_eval(named[0]) if named else []
    return found


def test_every_registry_names_the_modules_of_its_own_room_that_fill_it():
    """Each registry lists its builders' modules (literal paths, so this test and a reader see them), every one a
    module of the registry's own room: a registry never imports another room by string."""
    found = registry_locations()
    assert len(found) == 11, sorted(found)
    wrong = {
        where: location
        for where, locations in found.items()
        for location in locations or ["(none)"]
        if not is_submodule(location) or room_of(location) != room_of(where.split(":")[0])
    }
    assert wrong == {}
