"""The store's rules are written once, and its modules import in one direction.

* The fence predicate and the attempt-lease cap are each one SQL fragment, in
  ``_store/sql/leases.py``; no other module spells either.
* No import circle crosses files in ``keepgoing._store``, counting imports inside
  functions, except imports made only for type checking (``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "keepgoing"
LEASES = PACKAGE / "_store" / "sql" / "leases.py"

#: Each rule, and what spelling it would have anywhere it was written again.
RULES = {
    # ``fence = ?`` compared (not ``fence = fence + 1``), in SQL or in Python.
    "the fence predicate": re.compile(r"\bfence = \?|\.fence\s*[!=]=|fence\s*[!=]=\s*\w+\.fence"),
    # The cap of an attempt's lease at its deadline: SQL's MIN or Python's min.
    "the attempt-lease cap": re.compile(r"MIN\(\? \+ \?|min\(\s*now \+ lease_ttl"),
}


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _where_spelled(pattern: re.Pattern[str]) -> list[str]:
    return [
        str(path.relative_to(SRC))
        for path in _sources()
        if pattern.search(path.read_text(encoding="utf-8"))
    ]


def test_each_rule_is_spelled_in_one_module_only() -> None:
    for rule, pattern in RULES.items():
        assert _where_spelled(pattern) == [str(LEASES.relative_to(SRC))], rule


def test_the_rules_are_named_fragments_that_the_statements_use() -> None:
    text = LEASES.read_text(encoding="utf-8")
    assert "FENCED = \"status = 'running' AND fence = ?\"" in text
    assert "def attempt_lease(deadline: str) -> str:" in text
    users = {
        path.relative_to(SRC).as_posix()
        for path in _sources()
        if re.search(r"\bFENCED\b", path.read_text(encoding="utf-8"))
    }
    assert {
        "keepgoing/_store/sql/commands.py",
        "keepgoing/_store/sql/tasks.py",
        "keepgoing/_store/sql/leases.py",
    } <= users


def test_the_rule_search_finds_a_second_spelling() -> None:
    planted = 'conn.execute("UPDATE tasks SET x = 1 WHERE fence = ?", (f,))\n'
    assert RULES["the fence predicate"].search(planted)
    assert RULES["the fence predicate"].search("if row.fence != c.fence:")
    assert not RULES["the fence predicate"].search("SET fence = fence + 1")
    assert RULES["the attempt-lease cap"].search("lease = min(now + lease_ttl, deadline)")


# -- import circles ------------------------------------------------------------------------
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    base = SRC.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    return skipped


def imports_of(source: str, module: str, *, is_package: bool) -> set[str]:
    """The keepgoing modules ``source`` imports at run time (anywhere, functions too)."""
    tree = ast.parse(source)
    skipped = _type_only(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                # ``from pkg import submodule`` depends on the submodule; a name
                # from a module depends on that module.
                found.add(sub if _is_module(sub) else base)
    return {name for name in found if name.startswith("keepgoing.")}


def _graph(package: str) -> dict[str, set[str]]:
    root = SRC.joinpath(*package.split("."))
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        name = _module_name(path)
        text = path.read_text(encoding="utf-8")
        targets = imports_of(text, name, is_package=path.name == "__init__.py")
        graph[name] = {t for t in targets if t.startswith(package) and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_crosses_files_in_the_store() -> None:
    assert circles(_graph("keepgoing._store")) == []


def test_the_circle_check_sees_a_circle_through_a_function() -> None:
    a = imports_of(
        "def f():\n    from keepgoing._store.b import x\n",
        "keepgoing._store.a",
        is_package=False,
    )
    b = imports_of(
        "from typing import TYPE_CHECKING\n"
        "from keepgoing._store.a import f\n"
        "if TYPE_CHECKING:\n    from keepgoing._store.c import C\n",
        "keepgoing._store.b",
        is_package=False,
    )
    assert "keepgoing._store.c" not in b  # type-only: no circle through it
    graph = {"keepgoing._store.a": a, "keepgoing._store.b": b}
    assert circles(graph) == [["keepgoing._store.a", "keepgoing._store.b"]]


# -- names -----------------------------------------------------------------------------------
def _classes_named(name: str) -> list[str]:
    pattern = re.compile(rf"^class {name}\b", re.MULTILINE)
    return [
        str(path.relative_to(SRC))
        for path in _sources()
        if pattern.search(path.read_text(encoding="utf-8"))
    ]


def test_store_names_mean_one_thing() -> None:
    for name in ("TaskRow", "RunRef", "Migration", "ClaimRow", "TaskState", "CommandRun"):
        assert len(_classes_named(name)) <= 1, (name, _classes_named(name))
    assert _classes_named("Migration") == ["keepgoing/_store/migrate.py"]
    assert _classes_named("RunMove") == ["keepgoing/_groups/upgrade.py"]


def test_worker_stops_have_one_module_per_layer() -> None:
    stops = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "stop" in p.name)
    assert stops == [
        "_groups/worker_stops.py",
        "_store/sql/worker_stops.py",
        "_store/worker_stops.py",
        "_worker/worker_stops.py",
    ]
