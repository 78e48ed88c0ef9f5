"""Import boundaries: the deterministic core does no I/O and knows nothing above it.

``keepgoing._runtime`` (the workflow loop and instances) and ``keepgoing._history``
(events and their codec) take history in and give commands out. They must not
import the store, worker, API, volumes, server or CLI layers, nor anything
that reads the clock, the network, the disk or the environment. The rule is
checked on the source with :mod:`ast`, following the core's own imports into
the helper modules it uses (``_payload``, ``errors``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "keepgoing"

CORE_PACKAGES = ("keepgoing._runtime", "keepgoing._history")

# Layers above the core.
FORBIDDEN_INTERNAL = (
    "keepgoing._store",
    "keepgoing._worker",
    "keepgoing._workflow",
    "keepgoing._views",
    "keepgoing._client",
    "keepgoing._server",
    "keepgoing._volumes",
    "keepgoing._clock",  # time is given to the core by the activation, never read
    "keepgoing.cli",
    "keepgoing.testing",
)

# What the core (and every keepgoing module it imports) may take from the
# standard library. Adding to this list is a design decision: none of it may
# do I/O or read the clock.
ALLOWED_STDLIB = frozenset(
    {
        "__future__",
        "asyncio",
        "collections",
        "contextvars",
        "dataclasses",
        "json",
        "math",
        "random",
        "traceback",
        "typing",
        "uuid",
    }
)

# Named so a failure explains itself; all are outside ALLOWED_STDLIB too.
IO_MODULES = frozenset(
    {
        "datetime",
        "http",
        "io",
        "os",
        "pathlib",
        "select",
        "selectors",
        "shutil",
        "socket",
        "sqlite3",
        "ssl",
        "subprocess",
        "sys",
        "tempfile",
        "threading",
        "time",
        "urllib",
    }
)

IO_BUILTINS = frozenset({"open", "input", "print", "exec", "eval", "__import__", "breakpoint"})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _path_of(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in the file (with line numbers)."""
    source = path.read_text(encoding="utf-8")
    return _imports_in(source, _module_name(path), is_package=path.name == "__init__.py")


def _imports_in(source: str, module: str, *, is_package: bool) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            # ``from keepgoing._runtime import loop`` imports a submodule.
            submodules = [a.name for a in node.names if _path_of(f"{base}.{a.name}") is not None]
            # ``from keepgoing import errors`` takes only a submodule: the top package's
            # names (the public surface) are not imported by it.
            if base != "keepgoing" or len(submodules) < len(node.names):
                found.append((node.lineno, base))
            found.extend((node.lineno, f"{base}.{name}") for name in submodules)
    return found


def _core_files() -> list[Path]:
    files: list[Path] = []
    for package in CORE_PACKAGES:
        files.extend(sorted(SRC.joinpath(*package.split(".")).rglob("*.py")))
    return files


def _core_closure() -> dict[str, Path]:
    """The core's modules plus every keepgoing module they import, transitively."""
    todo = {_module_name(p): p for p in _core_files()}
    seen: dict[str, Path] = {}
    while todo:
        name, path = todo.popitem()
        seen[name] = path
        for _, imported in _imports(path):
            if imported.startswith("keepgoing.") and imported not in seen:
                target = _path_of(imported)
                if target is not None and not imported.startswith(FORBIDDEN_INTERNAL):
                    todo[imported] = target
    return seen


def _violations(path: Path, rule: str) -> list[str]:
    return _judge(_imports(path), str(path.relative_to(SRC)), rule)


def _judge(imports: list[tuple[int, str]], where: str, rule: str) -> list[str]:
    problems: list[str] = []
    for line, imported in imports:
        top = imported.split(".")[0]
        if imported == "keepgoing":
            problems.append(f"{where}:{line} imports the whole keepgoing package")
        elif imported.startswith(FORBIDDEN_INTERNAL):
            problems.append(f"{where}:{line} imports {imported} (a layer above the core)")
        elif rule == "history" and imported.startswith("keepgoing._runtime"):
            problems.append(f"{where}:{line} imports {imported} (history is plain data)")
        elif top in IO_MODULES:
            problems.append(f"{where}:{line} imports {imported}, which does I/O or reads time")
        elif top != "keepgoing" and top not in ALLOWED_STDLIB:
            problems.append(f"{where}:{line} imports {imported}, not allowed in the core")
    return problems


def test_the_core_has_modules() -> None:
    names = {_module_name(p) for p in _core_files()}
    assert {"keepgoing._runtime.loop", "keepgoing._runtime.instance"} <= names
    assert {"keepgoing._history.events", "keepgoing._history.codec"} <= names


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_imports_only_below_itself(path: Path) -> None:
    rule = "history" if "_history" in path.parts else "runtime"
    assert _violations(path, rule) == []


def test_modules_the_core_imports_follow_the_same_rule() -> None:
    closure = _core_closure()
    helpers = {name: path for name, path in closure.items() if not name.startswith(CORE_PACKAGES)}
    assert set(helpers) == {"keepgoing._payload", "keepgoing.errors"}
    problems = [p for path in helpers.values() for p in _violations(path, "runtime")]
    assert problems == []


def test_history_does_not_import_the_runtime() -> None:
    for name, path in _core_closure().items():
        if name.startswith("keepgoing._history"):
            assert not any(i.startswith("keepgoing._runtime") for _, i in _imports(path)), name


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_calls_no_io_builtins(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [
        f"{node.func.id} at line {node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in IO_BUILTINS
    ]
    assert calls == []


def test_the_checker_reports_what_breaks_the_rule() -> None:
    source = (
        "import time\n"
        "import keepgoing\n"
        "import numpy\n"
        "from keepgoing._store import sqlite\n"
        "from . import loop\n"
        "def f():\n"
        "    from .._worker import worker\n"
        "    import sqlite3.dbapi2\n"
    )
    imports = _imports_in(source, "keepgoing._runtime.probe", is_package=False)
    assert [name for _, name in imports] == [
        "time",
        "keepgoing",
        "numpy",
        "keepgoing._store",
        "keepgoing._store.sqlite",
        "keepgoing._runtime",
        "keepgoing._runtime.loop",
        "keepgoing._worker",
        "keepgoing._worker.worker",
        "sqlite3.dbapi2",
    ]
    problems = _judge(imports, "probe.py", "history")
    assert problems == [
        "probe.py:1 imports time, which does I/O or reads time",
        "probe.py:2 imports the whole keepgoing package",
        "probe.py:3 imports numpy, not allowed in the core",
        "probe.py:4 imports keepgoing._store (a layer above the core)",
        "probe.py:4 imports keepgoing._store.sqlite (a layer above the core)",
        "probe.py:5 imports keepgoing._runtime (history is plain data)",
        "probe.py:5 imports keepgoing._runtime.loop (history is plain data)",
        "probe.py:7 imports keepgoing._worker (a layer above the core)",
        "probe.py:7 imports keepgoing._worker.worker (a layer above the core)",
        "probe.py:8 imports sqlite3.dbapi2, which does I/O or reads time",
    ]


# -- the layers above the core ---------------------------------------------------------
# ``keepgoing._workflow`` is what user code defines (tasks, workflows, messages,
# children); the worker runs it and the client starts it by name, so it knows
# neither. The direct-call runner reaches it through ``_workflow.runner``.
WORKFLOW_PACKAGE = "keepgoing._workflow"
ABOVE_WORKFLOW = (
    "keepgoing._worker",
    "keepgoing._views",
    "keepgoing._client",
    "keepgoing._store",
    "keepgoing._server",
    "keepgoing._volumes",
    "keepgoing.cli",
    "keepgoing.testing",
)
WORKER_PACKAGE = "keepgoing._worker"
ABOVE_WORKER = ("keepgoing._views", "keepgoing._client", "keepgoing._server", "keepgoing.cli")


def _package_files(package: str) -> list[Path]:
    return sorted(SRC.joinpath(*package.split(".")).rglob("*.py"))


def _upward(imports: list[tuple[int, str]], where: str, above: tuple[str, ...]) -> list[str]:
    return [
        f"{where}:{line} imports {imported} (a layer above it)"
        if imported != "keepgoing"
        else f"{where}:{line} imports the whole keepgoing package"
        for line, imported in imports
        if imported == "keepgoing" or imported.startswith(above)
    ]


def test_the_upper_layers_have_modules() -> None:
    workflow = {_module_name(p) for p in _package_files(WORKFLOW_PACKAGE)}
    assert {"keepgoing._workflow.task", "keepgoing._workflow.workflow"} <= workflow
    assert "keepgoing._worker.worker" in {_module_name(p) for p in _package_files(WORKER_PACKAGE)}


@pytest.mark.parametrize(
    "path", _package_files(WORKFLOW_PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_workflow_definitions_import_no_layer_above_them(path: Path) -> None:
    where = str(path.relative_to(SRC))
    assert _upward(_imports(path), where, ABOVE_WORKFLOW) == []


@pytest.mark.parametrize(
    "path", _package_files(WORKER_PACKAGE), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_the_worker_imports_no_client_server_or_cli(path: Path) -> None:
    where = str(path.relative_to(SRC))
    assert _upward(_imports(path), where, ABOVE_WORKER) == []


def test_the_layer_checker_sees_imports_inside_functions() -> None:
    source = (
        "from keepgoing._workflow import registry\n"
        "def run():\n"
        "    from keepgoing._worker.inprocess import run_in_process\n"
        "    import keepgoing._client.client\n"
        "    from ..cli import main\n"
    )
    imports = _imports_in(source, "keepgoing._workflow.probe", is_package=False)
    assert _upward(imports, "probe.py", ABOVE_WORKFLOW) == [
        "probe.py:3 imports keepgoing._worker.inprocess (a layer above it)",
        "probe.py:4 imports keepgoing._client.client (a layer above it)",
        "probe.py:5 imports keepgoing.cli (a layer above it)",
    ]


# Every layer, bottom up, and what it must never import (even inside a function).
# The runtime and history are checked more strictly above; the workflow and worker
# packages have their own tests.
LAYER_RULES = {
    "keepgoing._store": (
        "keepgoing._volumes",
        "keepgoing._workflow",
        "keepgoing._worker",
        "keepgoing._views",
        "keepgoing._client",
        "keepgoing._server",
        "keepgoing.cli",
        "keepgoing.testing",
    ),
    "keepgoing._volumes": (
        "keepgoing._worker",
        "keepgoing._views",
        "keepgoing._client",
        "keepgoing._server",
        "keepgoing.cli",
        "keepgoing.testing",
    ),
    "keepgoing._groups": (
        "keepgoing._volumes",
        "keepgoing._workflow",
        "keepgoing._worker",
        "keepgoing._views",
        "keepgoing._client",
        "keepgoing._server",
        "keepgoing.cli",
        "keepgoing.testing",
    ),
    # Read-side views of runs over the store protocol (the steps fold, the catalog,
    # batches, queues, operation status, what a run waits for): below the client and
    # the server, which are peers over them and never import each other.
    "keepgoing._views": (
        "keepgoing._volumes",
        "keepgoing._worker",
        "keepgoing._client",
        "keepgoing._server",
        "keepgoing.cli",
        "keepgoing.testing",
    ),
    "keepgoing._client": ("keepgoing._server", "keepgoing.cli", "keepgoing.testing"),
    "keepgoing._server": ("keepgoing._client", "keepgoing.cli", "keepgoing.testing"),
    # The web UI sits with the server and reads through its API: no worker, no
    # workflow code, no volumes API, no CLI.
    "keepgoing._server.ui": (
        "keepgoing._worker",
        "keepgoing._workflow",
        "keepgoing._volumes",
        "keepgoing.cli",
        "keepgoing.testing",
    ),
    # The model gateway sits beside the server (which mounts its routes); the task-side
    # client (``keepgoing.gateway``) must never pull the server or the worker in.
    "keepgoing._gateway": (
        "keepgoing._worker",
        "keepgoing._views",
        "keepgoing._client",
        "keepgoing._server",
        "keepgoing.cli",
        "keepgoing.testing",
    ),
}


def test_the_public_gateway_module_imports_no_server() -> None:
    path = PACKAGE / "gateway.py"
    above = ("keepgoing._server", "keepgoing._worker", "keepgoing._client", "keepgoing.cli")
    assert _upward(_imports(path), "keepgoing/gateway.py", above) == []


@pytest.mark.parametrize(
    ("path", "above"),
    [(p, above) for package, above in LAYER_RULES.items() for p in _package_files(package)],
    ids=lambda v: str(v.relative_to(PACKAGE)) if isinstance(v, Path) else "",
)
def test_no_layer_imports_one_above_it(path: Path, above: tuple[str, ...]) -> None:
    where = str(path.relative_to(SRC))
    assert _upward(_imports(path), where, above) == []


def test_the_layer_rules_refuse_a_server_that_imports_the_client() -> None:
    source = (
        "from keepgoing._views.steps import build_steps\n"
        "from keepgoing._client.runs import WorkflowRun\n"
        "def route():\n"
        "    from ..._client import runs\n"
    )
    imports = _imports_in(source, "keepgoing._server.routes.probe", is_package=False)
    assert _upward(imports, "probe.py", LAYER_RULES["keepgoing._server"]) == [
        "probe.py:2 imports keepgoing._client.runs (a layer above it)",
        "probe.py:4 imports keepgoing._client (a layer above it)",
        "probe.py:4 imports keepgoing._client.runs (a layer above it)",
    ]


def test_the_layer_rules_refuse_a_client_that_imports_the_server() -> None:
    source = "from keepgoing._server.schemas import anything\n"
    imports = _imports_in(source, "keepgoing._client.probe", is_package=False)
    assert _upward(imports, "probe.py", LAYER_RULES["keepgoing._client"]) == [
        "probe.py:1 imports keepgoing._server.schemas (a layer above it)",
    ]


def test_the_views_sit_below_both_peers() -> None:
    source = "from keepgoing._client.runs import WorkflowRun\nimport keepgoing._server.app\n"
    imports = _imports_in(source, "keepgoing._views.probe", is_package=False)
    assert _upward(imports, "probe.py", LAYER_RULES["keepgoing._views"]) == [
        "probe.py:1 imports keepgoing._client.runs (a layer above it)",
        "probe.py:2 imports keepgoing._server.app (a layer above it)",
    ]
    assert "keepgoing._views.steps" in {_module_name(p) for p in _package_files("keepgoing._views")}
