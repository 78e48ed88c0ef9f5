"""What deployed code can reach: a replica's environment is an allowlist, the store URL
never travels on its command line, and on PostgreSQL its own database role can run
workflows but cannot mint a token, read a secret or write the audit log.

A real ``keepgoing server`` (whose autoscaler starts the replicas) runs with a
provider key, the secret key and other variables of its own in its environment;
the deployed ``nosy_app`` reports what it sees from inside a replica.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
from cryptography.fernet import Fernet

import keepgoing
from keepgoing._groups.replica_env import PASSED

from ._support import Sandbox, WorkerProcess, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PLANTED = {
    "OPENAI_API_KEY": "sk-planted-" + secrets.token_hex(8),
    "KEEPGOING_SECRET_KEY": Fernet.generate_key().decode(),
    "KEEPGOING_TOKEN": "kg_0123456789abcdef_" + "x" * 24,
    "SERVER_ONLY_SETTING": "planted-" + secrets.token_hex(4),
}
#: What a replica may see: the allowlist, and what keepgoing itself sets.
ALLOWED = {
    "HOME",
    "VIRTUAL_ENV",
    "KEEPGOING_STORE",
    "KEEPGOING_GROUP",
    "KEEPGOING_GROUP_REVISION",
    "KEEPGOING_TASK_QUEUES",
    "KEEPGOING_SECRET_ENV",
    "KEEPGOING_URL",  # the server's, whose gateway its model calls go to ...
    "KEEPGOING_TOKEN",  # ... with a key minted for its revision
    "KEEPGOING_SUPERVISOR_PID",  # the server's pid: the replica stops when it dies
    "KG_TEST_DIR",  # the group's own env
}


@pytest.fixture
def role(kg: Sandbox) -> Iterator[str | None]:
    """On PostgreSQL: a worker role made with `keepgoing store worker-role`, and its URL."""
    if not kg.url.startswith("postgres"):
        yield None
        return
    import psycopg  # noqa: PLC0415

    name = f"kg_worker_{secrets.token_hex(4)}"
    made = subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", "store", "worker-role", name, "--store", kg.url],
        capture_output=True,
        text=True,
        env=kg.env(),
        timeout=60,
        check=False,
    )
    try:
        assert made.returncode == 0, made.stdout + made.stderr
        parts = urlsplit(kg.url)
        yield urlunsplit(parts._replace(netloc=f"{name}@{parts.hostname}:{parts.port or 5432}"))
    finally:
        with psycopg.connect(kg.url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{name}"')
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.TransportError:
        return False


def test_deployed_code_sees_only_its_allowlist_and_its_role(
    kg: Sandbox, role: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server._support import free_port, make_token  # noqa: PLC0415

    token = make_token(kg.url, "root", ["admin"])
    config = tmp_path / "config"
    (config / "keepgoing").mkdir(parents=True)
    (config / "keepgoing" / "secret.key").write_text(PLANTED["KEEPGOING_SECRET_KEY"] + "\n")
    env = {
        **kg.env(),
        **PLANTED,
        "XDG_CONFIG_HOME": str(config),
        "KEEPGOING_GROUPS_DIR": str(kg.root / "groups"),
        "PYTHONPATH": str(kg.root),
    }
    if role is not None:
        env["KEEPGOING_WORKER_STORE"] = role
    port = free_port()
    argv = [sys.executable, "-m", "keepgoing.cli", "server", "--port", str(port)]
    env["KEEPGOING_STORE"] = kg.url  # the server's own URL: in its environment, not argv
    server = WorkerProcess("server", argv, kg.root, env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(url), 30, "the server")
        with keepgoing.Client(url, token=token) as remote:
            worker = keepgoing.deploy_workflow_worker(
                kg.app("nosy_app"),
                client=remote,
                name="wf-nosy",
                shutdown_delay_seconds=0.5,
                env={"KG_TEST_DIR": kg.env()["KG_TEST_DIR"]},
            )
            handle = worker.trigger("nosy", {})
            seen = json.loads(remote.result(handle.workflow_id, timeout=120))
    finally:
        if server.alive():
            server.terminate(timeout=60)
        server.reap()
        print(server.report())

    names = set(seen["env"])
    passed = {
        n
        for n in names
        if n in PASSED or any(n.startswith(p[:-1]) for p in PASSED if p.endswith("*"))
    }
    assert names - passed - ALLOWED == set(), seen["env"]
    for name in (*PLANTED, "XDG_CONFIG_HOME", "KEEPGOING_WORKER_STORE"):
        if name != "KEEPGOING_TOKEN":  # it has one: a key minted for its revision
            assert name not in names
    # The server's URL and a key of its own (tests/gateway/test_deployed_groups.py
    # reads their values from /proc).
    assert {"KEEPGOING_URL", "KEEPGOING_TOKEN"} <= names
    assert seen["home"] != os.environ.get("HOME") and str(kg.root / "groups") in seen["home"]
    # The store URL reached it in its environment, never on its command line.
    assert "--store" not in seen["cmdline"] and seen["store"] not in seen["cmdline"]
    if role is None:
        assert seen["store"] == f"sqlite:///{kg.db}" or seen["store"].startswith("sqlite:///")
        return
    assert seen["store"] == role  # the worker role's URL, not the server's
    attempts = seen["attempts"]
    assert attempts["read_runs"] == "done: runs"  # the role runs workflows ...
    for refused in ("insert_token", "read_secrets", "write_audit"):  # ... and nothing more
        assert (
            attempts[refused].startswith("refused:") and "permission denied" in attempts[refused]
        ), attempts
    import psycopg  # noqa: PLC0415

    with psycopg.connect(kg.url) as conn:
        assert conn.execute("SELECT count(*) FROM tokens WHERE name = 'mallory'").fetchone() == (0,)


def test_a_worker_role_cannot_insert_a_token(kg: Sandbox, role: str | None) -> None:
    """The grants themselves, statement by statement, on the worker role's connection."""
    if role is None:
        pytest.skip("SQLite has no roles: docs/groups.md says what that means")
    import psycopg  # noqa: PLC0415

    def attempt(sql: str) -> str:
        try:
            with psycopg.connect(role, autocommit=True) as conn:
                conn.execute(sql)
        except psycopg.errors.InsufficientPrivilege:
            return "denied"
        return "allowed"

    assert (
        attempt(
            "INSERT INTO tokens (token_id, name, kind, permissions, secret_hash, created_at, "
            "created_by) VALUES ('feedfacefeedface', 'x', 'user', '[\"admin\"]', 'x', 0, 'x')"
        )
        == "denied"
    )
    assert attempt("UPDATE tokens SET permissions = '[\"admin\"]'") == "denied"
    assert attempt("SELECT * FROM secrets") == "denied"
    assert attempt("SELECT * FROM ui_sessions") == "denied"
    assert attempt("DELETE FROM audit_log") == "denied"
    assert attempt("INSERT INTO group_revisions (group_name) VALUES ('x')") == "denied"
    assert attempt("UPDATE gateway_keys SET total_budget = NULL") == "denied"
    assert attempt("CREATE TABLE mine (x int)") == "denied"
    assert attempt("SELECT count(*) FROM runs") == "allowed"
    assert attempt("SELECT count(*) FROM history") == "allowed"
