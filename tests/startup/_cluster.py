"""A throwaway PostgreSQL cluster on 127.0.0.1 that a test can stop and start.

Built on the chaos lab's helpers (``chaos._lab``), without its network
namespaces: one ``initdb`` into a temporary folder, run as the ``postgres``
user when the tests run as root, on a free port. Trust authentication for
``postgres``; the role :data:`PASSWORD_ROLE` must give its password (SCRAM),
for the tests of a wrong one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from chaos._lab import _free_port, _run, postgres_bin

DATABASE = "kgstart"
APP_DATABASE = "kgstart_app"  # owned by PASSWORD_ROLE, which migrates it
PASSWORD_ROLE = "kgapp"
PASSWORD = "right-horse-battery"


class Cluster:
    def __init__(self) -> None:
        bindir = postgres_bin()
        if bindir is None:
            raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
        self.bin = bindir
        self.folder = Path(tempfile.mkdtemp(prefix="keepgoing-startup-"))
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self.port = _free_port()
        self.running = False

    def url(self, database: str = DATABASE, user: str = "postgres", password: str = "") -> str:
        secret = f":{password}" if password else ""
        return f"postgresql://{user}{secret}@127.0.0.1:{self.port}/{database}"

    def create(self) -> None:
        """initdb, start, create the database and the password role."""
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.folder, "postgres")
            self.folder.chmod(0o755)
        self._as_postgres(
            [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
             "-E", "UTF8", "--locale=C", "--no-sync"]
        )  # fmt: skip
        hba = (
            "local all all trust\n"
            f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\n"
        )
        (self.data / "pg_hba.conf").write_text(hba)
        self.start()
        self.sql(f"CREATE DATABASE {DATABASE}")
        self.sql(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}'")
        self.sql(f"CREATE DATABASE {APP_DATABASE} OWNER {PASSWORD_ROLE}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1"
        self._pg_ctl("-o", options, "start")
        self.running = True

    def stop(self) -> None:
        if self.running:
            self._pg_ctl("-m", "fast", "stop")
            self.running = False

    def sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg  # noqa: PLC0415

        url = f"postgresql://postgres@/{database}?host={self.folder}&port={self.port}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def postgres_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def _as_postgres(self, argv: list[str]) -> str:
        command = ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv
        return _run(command)

    def _pg_ctl(self, *args: str) -> None:
        pg_ctl = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log)]
        self._as_postgres([*pg_ctl, "-w", "-t", "60", *args])
