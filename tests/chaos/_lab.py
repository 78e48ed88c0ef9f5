"""A small lab of machines on this one: a throwaway PostgreSQL and workers across a network.

:class:`Lab` starts its own PostgreSQL cluster (``initdb`` into a temporary
folder, run as the ``postgres`` user) and, when it can, puts the database and
each worker in a network namespace of its own (``ip netns``), joined by veth
pairs: worker *i* reaches the database at ``10.231.i.1`` from ``10.231.i.2``
over a real (virtual) link, with its own TCP stack. Every address lives inside
the lab's namespaces, none on this machine's own interfaces, and no traffic
leaves the machine. The test process itself talks to the database over its
Unix socket, which namespaces do not isolate.

Why a throwaway cluster rather than the machine's PostgreSQL (restarted with
``pg_ctlcluster``): the database must listen inside the lab's namespace, and
restarting the shared server would cut the connections of every other test
session on the machine. ``pg_ctl restart``, which ``pg_ctlcluster`` wraps, does
the same to our own cluster.

Without ``ip netns`` (not root, no iproute2) the lab falls back to plain
processes and a cluster on ``127.0.0.1``; :attr:`Lab.isolation` says which.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

DATABASE = "kgchaos"


def postgres_bin() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl`` (the newest installed PostgreSQL)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _version(path: str) -> int:
    part = path.split("/")[4]
    return int(part) if part.isdigit() else 0


def _run(argv: list[str], timeout: float = 60.0) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    probe = f"kgprobe{os.getpid()}"
    try:
        _run(["ip", "netns", "add", probe])
    except (RuntimeError, OSError) as exc:
        return f"`ip netns add` failed: {exc}"
    with contextlib.suppress(RuntimeError):
        _run(["ip", "netns", "del", probe])
    return None


@dataclass(frozen=True)
class Host:
    """Where one worker runs: its namespace (or None) and the database's URL from there."""

    name: str
    netns: str | None
    store_url: str

    def command(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv


class Lab:
    """A throwaway PostgreSQL cluster and ``hosts`` places to run workers from."""

    def __init__(self, hosts: int) -> None:
        bindir = postgres_bin()
        if bindir is None:
            raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
        self.bin = bindir
        self.tag = uuid.uuid4().hex[:6]
        self.folder = Path(tempfile.mkdtemp(prefix="keepgoing-lab-"))
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        reason = netns_unavailable()
        self.isolation = "netns" if reason is None else f"processes ({reason})"
        self.db_netns = f"kg{self.tag}db" if reason is None else None
        self.port = 5432 if reason is None else _free_port()
        self.hosts = [self._host(i) for i in range(1, hosts + 1)]
        self.socket_url = f"postgresql://postgres@/{DATABASE}?host={self.folder}&port={self.port}"

    def _host(self, i: int) -> Host:
        if self.db_netns is None:
            return Host(f"w{i}", None, f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}")
        return Host(
            f"w{i}",
            f"kg{self.tag}w{i}",
            f"postgresql://postgres@10.231.{i}.1:{self.port}/{DATABASE}",
        )

    # -- setting up --------------------------------------------------------------
    def start(self) -> None:
        if self.db_netns is not None:
            self._wire()
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            shutil.chown(self.folder, "postgres")
            self.folder.chmod(0o755)
        self._as_postgres(
            [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
             "-E", "UTF8", "--locale=C", "--no-sync"]
        )  # fmt: skip
        with (self.data / "pg_hba.conf").open("a") as hba:  # the workers' links
            hba.write("host all all 10.231.0.0/16 trust\n")
        listen = "*" if self.db_netns else "127.0.0.1"
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses={listen} "
            "-c max_connections=200 -c shared_buffers=64MB"
        )
        self._pg_ctl("-o", options, "start")
        self._sql(f"CREATE DATABASE {DATABASE}", database="postgres")

    def _wire(self) -> None:
        assert self.db_netns is not None
        _run(["ip", "netns", "add", self.db_netns])
        _run(["ip", "-n", self.db_netns, "link", "set", "lo", "up"])
        for i, host in enumerate(self.hosts, start=1):
            assert host.netns is not None
            _run(["ip", "netns", "add", host.netns])
            _run(["ip", "-n", host.netns, "link", "set", "lo", "up"])
            _run(["ip", "link", "add", f"kgd{i}", "netns", self.db_netns, "type", "veth",
                  "peer", "name", f"kgw{i}", "netns", host.netns])  # fmt: skip
            _run(["ip", "-n", self.db_netns, "addr", "add", f"10.231.{i}.1/24", "dev", f"kgd{i}"])
            _run(["ip", "-n", host.netns, "addr", "add", f"10.231.{i}.2/24", "dev", f"kgw{i}"])
            _run(["ip", "-n", self.db_netns, "link", "set", f"kgd{i}", "up"])
            _run(["ip", "-n", host.netns, "link", "set", f"kgw{i}", "up"])

    def _as_postgres(self, argv: list[str], timeout: float = 60.0) -> str:
        command = ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv
        if self.db_netns is not None:
            command = ["ip", "netns", "exec", self.db_netns, *command]
        return _run(command, timeout)

    def _pg_ctl(self, *args: str) -> None:
        # -l on every call: a server started without it would keep our output pipe open.
        pg_ctl = [str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log)]
        self._as_postgres([*pg_ctl, "-w", "-t", "60", *args])

    def _sql(self, statement: str, *, database: str = DATABASE) -> None:
        import psycopg  # noqa: PLC0415

        url = f"postgresql://postgres@/{database}?host={self.folder}&port={self.port}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    # -- faults ------------------------------------------------------------------------
    def restart_database(self) -> float:
        """``pg_ctl restart -m fast`` (what ``pg_ctlcluster restart`` does); seconds taken."""
        began = time.monotonic()
        self._pg_ctl("-m", "fast", "restart")
        return time.monotonic() - began

    # -- workers ------------------------------------------------------------------------
    def worker_argv(self, host: Host, app: Path, *args: str) -> list[str]:
        argv = [sys.executable, "-m", "keepgoing.cli", "worker", str(app), "--store",
                host.store_url, *args]  # fmt: skip
        return host.command(argv)

    # -- tearing down ---------------------------------------------------------------------
    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._pg_ctl("-m", "immediate", "stop")
        for netns in [h.netns for h in self.hosts] + [self.db_netns]:
            if netns is not None:
                with contextlib.suppress(Exception):
                    _run(["ip", "netns", "del", netns])
        shutil.rmtree(self.folder, ignore_errors=True)

    def postgres_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
