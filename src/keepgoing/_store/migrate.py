"""Numbered migrations, one folder per dialect, recorded in ``keepgoing_schema``.

Files are ``NNNN_name.sql`` in each dialect's own package
(``keepgoing/_store/sqlite/migrations/``, ``keepgoing/_store/postgres/migrations/``);
each is applied once, in order, at start-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from keepgoing.errors import SchemaVersionError

__all__ = ["Migration", "load_migrations", "check_version"]

#: Where each dialect's migrations ship (inside the wheel, beside its code).
_FOLDERS = {
    "sqlite": "keepgoing._store.sqlite.migrations",
    "postgresql": "keepgoing._store.postgres.migrations",
}
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations(dialect: str) -> list[Migration]:
    """Every migration shipped for ``dialect``, in version order."""
    folder = resources.files(_FOLDERS[dialect])
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def check_version(applied: int, known: list[Migration], where: str) -> None:
    newest = known[-1].version if known else 0
    if applied > newest:
        raise SchemaVersionError(
            f"the store at {where} has schema version {applied}, but this keepgoing knows "
            f"only up to {newest}; upgrade keepgoing"
        )
