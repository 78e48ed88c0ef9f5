"""The unit tests mirror the package: ``tests/unit/<folder>/`` for ``keepgoing/<folder>/``.

A unit test sits in the folder named for the package folder its subject lives in
(``tests/unit/_store/`` for ``keepgoing/_store/``, ``tests/unit/cli/`` for
``keepgoing/cli/``), and a test of a top-level module (``_payload.py``,
``_backoff.py``, ``_sse.py``) sits in ``tests/unit/`` itself, named for it.
So a reader finds a module's tests where the module is, and a folder renamed in
the package cannot leave its tests under the old name.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "keepgoing"
UNIT = ROOT / "tests" / "unit"

# Files of the test tree itself, not tests of a module.
SUPPORT = frozenset({"__init__.py", "conftest.py"})


def _top_level_modules(package: Path) -> set[str]:
    """The names of the package's own modules, without a leading underscore."""
    return {p.stem.lstrip("_") for p in package.glob("*.py") if p.name != "__init__.py"}


def misplaced(unit: Path, package: Path) -> list[str]:
    """Every file under ``unit`` that does not mirror a folder or module of ``package``."""
    found: list[str] = []
    modules = _top_level_modules(package)
    for path in sorted(unit.rglob("*")):
        rel = path.relative_to(unit)
        where = rel.as_posix()
        if "__pycache__" in rel.parts:
            continue
        if path.is_dir():
            if not (package / rel / "__init__.py").is_file():
                found.append(f"tests/unit/{where}/ names no package folder keepgoing/{where}/")
            elif not (path / "__init__.py").is_file():
                found.append(f"tests/unit/{where}/ has no __init__.py")
            continue
        if len(rel.parts) > 1 or path.name in SUPPORT or path.name.startswith("_"):
            continue  # a file in a mirrored folder (checked above), or support code
        stem = path.stem.removeprefix("test_")
        if not path.name.startswith("test_") or not any(
            stem == name or stem.startswith(name + "_") for name in modules
        ):
            found.append(
                f"tests/unit/{where} tests no top-level module: move it into the "
                "folder named for its subject's package folder"
            )
    return found


def test_the_unit_tests_have_folders() -> None:
    folders = [p for p in UNIT.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert len(folders) >= 10
    assert any(p.name == "_store" for p in folders)


def test_every_unit_test_mirrors_a_package_folder() -> None:
    assert misplaced(UNIT, PACKAGE) == []


def test_the_checker_reports_what_breaks_the_mirror(tmp_path: Path) -> None:
    package = tmp_path / "src" / "keepgoing"
    (package / "_store").mkdir(parents=True)
    (package / "_store" / "__init__.py").touch()
    (package / "__init__.py").touch()
    (package / "_payload.py").touch()
    unit = tmp_path / "tests" / "unit"
    for name in (
        "__init__.py",
        "conftest.py",
        "_sim.py",
        "test_payload_values.py",
        "_store/__init__.py",
        "_store/test_rows.py",
        "_stores/__init__.py",
        "_stores/test_rows.py",
        "_worker/test_loop.py",
        "test_leases.py",
    ):
        (unit / name).parent.mkdir(parents=True, exist_ok=True)
        (unit / name).touch()
    (package / "_worker").mkdir()
    (package / "_worker" / "__init__.py").touch()

    assert misplaced(unit, package) == [
        "tests/unit/_stores/ names no package folder keepgoing/_stores/",
        "tests/unit/_worker/ has no __init__.py",
        "tests/unit/test_leases.py tests no top-level module: move it into the "
        "folder named for its subject's package folder",
    ]
