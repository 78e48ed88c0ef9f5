"""``docs/design.md``'s table of layers names every module of the package, and only real ones.

A row lists its modules in backticks: a path from the package root
(``_worker/worker.py``), then the row's other modules by file name
(``activation.py``), or a whole folder (``routes/``, ``providers/``,
``cli/*.py``). A module is listed when a row that names its top folder names its
file, its path or a folder it is in; a module at the package root is listed by
its path. Every file or folder the table names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "keepgoing"
DESIGN = ROOT / "docs" / "design.md"
SKIPPED = ("static", "templates", "flows", "__pycache__")


def _rows() -> list[set[str]]:
    text = DESIGN.read_text()
    table = text[text.index("## Layers") : text.index("### Where does X live")]
    rows = []
    for line in table.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            names = set()
            for quoted in re.findall(r"`([^`]+)`", line):
                names.update(p for p in re.split(r"[\s,()+]+", quoted) if p)
            rows.append({n.removeprefix("keepgoing/") for n in names})
    return rows


def _modules() -> list[Path]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if any(part in SKIPPED for part in rel.parts):
            continue
        if path.name == "__init__.py" and len(rel.parts) > 1:
            continue
        found.append(rel)
    return found


def _listed(rel: Path, rows: list[set[str]]) -> bool:
    posix, parts = rel.as_posix(), rel.parts
    for names in rows:
        if len(parts) == 1:
            if posix in names:
                return True
            continue
        top = parts[0]
        if not any(n.startswith(top + "/") for n in names):
            continue
        if posix in names or parts[-1] in names or f"{top}/*.py" in names:
            return True
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) + "/" in names:
                return True
            if depth > 1 and "/".join(parts[1:depth]) + "/" in names:
                return True
    return False


def test_every_module_has_a_row() -> None:
    rows = _rows()
    missing = [m.as_posix() for m in _modules() if not _listed(m, rows)]
    assert not missing, f"docs/design.md's table of layers leaves out {missing}"


def _exists(name: str, names: set[str]) -> bool:
    if (PACKAGE / name).exists():
        return True
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    folders = [PACKAGE / t for t in tops if (PACKAGE / t).is_dir()]
    return any(next(folder.glob("**/" + name.rstrip("/")), None) for folder in folders)


def test_every_module_the_table_names_exists() -> None:
    stale = [
        name
        for names in _rows()
        for name in sorted(names)
        if (name.endswith((".py", "/")) and "*" not in name and "://" not in name)
        and not _exists(name, names)
    ]
    assert not stale, f"docs/design.md's table of layers names what does not exist: {stale}"
