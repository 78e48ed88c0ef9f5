"""What an attacker or a careless client tries, against real server processes.

* a server without authentication answers only loopback ``Host`` names,
  refuses changes from another browser origin, and makes no tokens (DNS
  rebinding would otherwise mint admin tokens that work on every server);
* a lone surrogate anywhere in a JSON body is a 400 ``invalid_payload``
  naming the field, never a 500;
* a workflow id ending in ``/history`` or ``/result`` names its own run;
* a token is checked before anything is parsed (401 before 400);
* the last admin token cannot be revoked through the API (409).
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from keepgoing import Client
from keepgoing._open_store import store_from_url
from keepgoing._server import door
from keepgoing._server.app import create_app
from keepgoing._server.routing import ACTIONS
from keepgoing._server.serve import check_bind
from keepgoing._store.auth_protocol import PERMISSIONS
from keepgoing._store.protocol import Store
from keepgoing._volumes.paths import NAME_PATTERN
from keepgoing.errors import ConfigurationError

from ._support import Stack, run_store
from .test_api import error, result, start

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


# -- 1. DNS rebinding ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def open_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """`keepgoing server --no-auth` on loopback."""
    s = Stack(tmp_path_factory.mktemp("noauth"))
    try:
        s.start_server("--no-auth")
        yield s
    finally:
        s.cleanup()


def _port(stack: Stack) -> int:
    return int(stack.url.rsplit(":", 1)[1])


def _tokens(stack: Stack) -> list[Any]:
    found: list[Any] = run_store(stack.store_url, lambda s: s.list_tokens(include_revoked=True))
    return found


def test_a_rebound_host_cannot_mint_a_token(open_stack: Stack) -> None:
    port = _port(open_stack)
    body = {"name": "evil", "kind": "user", "permissions": ["admin"]}
    with open_stack.api() as api:
        refused = api.post("/api/v1/tokens", json=body, headers={"Host": f"evil.example:{port}"})
        assert error(refused, 403, "host_not_allowed")
        assert "loopback" in refused.json()["message"]
        # Reads are refused too: a rebound page cannot read runs either.
        runs = api.get("/api/v1/runs", headers={"Host": f"evil.example:{port}"})
        assert error(runs, 403, "host_not_allowed")
        # The right name with another port is another server, as far as we know.
        wrong_port = api.get("/api/v1/runs", headers={"Host": f"127.0.0.1:{port + 1}"})
        assert error(wrong_port, 403, "host_not_allowed")
    assert _tokens(open_stack) == []


def test_loopback_hosts_are_answered(open_stack: Stack) -> None:
    port = _port(open_stack)
    hosts = [f"127.0.0.1:{port}", f"[::1]:{port}", "127.0.0.1"]
    if door.localhost_is_loopback():
        hosts.append(f"localhost:{port}")
    with open_stack.api() as api:
        for host in hosts:
            assert api.get("/api/v1/runs", headers={"Host": host}).status_code == 200, host


def test_a_change_from_another_origin_is_refused(open_stack: Stack) -> None:
    port = _port(open_stack)
    body = {"event_type": "e", "correlation_id": "c", "payload": 1}
    with open_stack.api() as api:
        foreign = api.post("/api/v1/events", json=body, headers={"Origin": "http://evil.example"})
        assert error(foreign, 403, "origin_not_allowed")
        site = api.post("/api/v1/events", json=body, headers={"Sec-Fetch-Site": "cross-site"})
        assert error(site, 403, "origin_not_allowed")
        own = api.post("/api/v1/events", json=body, headers={"Origin": f"http://127.0.0.1:{port}"})
        assert own.status_code == 202, own.text
        # A script (no Origin) may change things: that is what --no-auth is for.
        assert api.post("/api/v1/events", json=body).status_code == 202


def test_a_host_port_of_other_digits_is_refused_not_a_crash() -> None:
    """Headers are decoded as Latin-1, where ``\xb2`` (superscript two) is a digit to
    ``str.isdigit`` but not to ``int``."""
    assert not door.host_allowed("127.0.0.1:\xb2", 8711)
    assert not door.host_allowed("[::1]:\xb2", 8711)
    assert door.host_allowed("[::1]:8711", 8711)


def test_a_raw_host_header_of_latin_1_bytes_is_403(open_stack: Stack) -> None:
    host, port = "127.0.0.1", _port(open_stack)
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(
            b"GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1:\xb2\r\nConnection: close\r\n\r\n"
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert b"host_not_allowed" in answer


def test_a_server_without_auth_makes_and_revokes_no_tokens(open_stack: Stack) -> None:
    body = {"name": "someone", "kind": "user", "permissions": ["runs.read"]}
    with open_stack.api() as api:
        made = api.post("/api/v1/tokens", json=body)
        assert error(made, 403, "permission_denied")
        assert "keepgoing token" in made.json()["message"]
        assert error(api.delete("/api/v1/tokens/0123456789abcdef"), 403, "permission_denied")
    assert _tokens(open_stack) == []


def test_localhost_is_resolved_before_it_is_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    def elsewhere(*_: Any, **__: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("203.0.113.7", 0))]

    door.localhost_is_loopback.cache_clear()
    monkeypatch.setattr(socket, "getaddrinfo", elsewhere)
    try:
        assert not door.is_loopback("localhost")
        assert not door.host_allowed("localhost:8711", 8711)
        with pytest.raises(ConfigurationError, match="authentication disabled"):
            check_bind("localhost", 8711, auth=False)
        assert door.host_allowed("127.0.0.1:8711", 8711)
    finally:
        monkeypatch.undo()
        door.localhost_is_loopback.cache_clear()


# -- 2. lone surrogates --------------------------------------------------------------------
def _raw(api: httpx.Client, path: str, text: str) -> httpx.Response:
    return api.post(path, content=text.encode(), headers={"Content-Type": "application/json"})


LONE = '"\\ud800"'  # JSON text for a lone high surrogate


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/api/v1/events",
            f'{{"event_type":"e","correlation_id":"c","payload":{LONE}}}',
            "payload",
        ),
        (
            "/api/v1/events",
            f'{{"event_type":"e","correlation_id":"c","payload":{{"a":[1,{{{LONE}:2}}]}}}}',
            "a key of body.payload.a[1]",
        ),
        ("/api/v1/events", f'{{"event_type":{LONE},"correlation_id":"c"}}', "event_type"),
        ("/api/v1/runs", f'{{"workflow":"sum_two","input":{{"a":{LONE},"b":2}}}}', "input.a"),
        ("/api/v1/runs", f'{{"workflow":"sum_two","input":{{{LONE}:1}}}}', "a key of body.input"),
        ("/api/v1/runs/x/messages", f'{{"name":"m","payload":{{"k":{LONE}}}}}', "payload.k"),
        ("/api/v1/runs/x/cancel", f'{{"reason":{LONE}}}', "reason"),
    ],
)
def test_a_lone_surrogate_is_400_naming_the_field(
    admin: httpx.Client, path: str, body: str, field: str
) -> None:
    response = _raw(admin, path, body)
    assert error(response, 400, "invalid_payload")
    assert field in response.json()["message"], response.json()["message"]
    # The connection survives: the next call on it is answered normally.
    assert admin.get("/api/v1/runs", params={"limit": 1}).status_code == 200


def test_raw_surrogate_bytes_are_refused_too(admin: httpx.Client) -> None:
    text = b'{"event_type":"e","correlation_id":"c","payload":"\xed\xa0\x80"}'
    response = admin.post(
        "/api/v1/events", content=text, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text


# -- 4. ids with /history or /result -----------------------------------------------------------
@pytest.mark.parametrize(
    "suffix", ["history", "result", "lineage", "cancel", "messages", "unblock"]
)
def test_an_id_ending_in_a_call_name_is_its_own_run(admin: httpx.Client, suffix: str) -> None:
    base = f"t-{uuid.uuid4().hex[:8]}"
    tricky = f"{base}/{suffix}"
    start(admin, "sum_two", {"a": 1, "b": 2}, workflow_id=base)
    mine = start(admin, "sum_two", {"a": 3, "b": 4}, workflow_id=tricky)
    encoded = tricky.replace("/", "%2F")
    run = admin.get(f"/api/v1/runs/{encoded}")
    assert run.status_code == 200, run.text
    assert (run.json()["workflow_id"], run.json()["run_id"]) == (tricky, mine["run_id"])
    assert result(admin, encoded)["result"] == 7
    history = admin.get(f"/api/v1/runs/{encoded}/history").json()
    assert (history["workflow_id"], history["run_id"]) == (tricky, mine["run_id"])
    # A literal `/` before the call name still names the call on the shorter id.
    assert admin.get(f"/api/v1/runs/{base}/history").json()["workflow_id"] == base


def test_every_call_on_a_run_is_routed_on_the_raw_path() -> None:
    # A call missing from ACTIONS would be read as the end of a workflow id.
    prefix = "/api/v1/runs/{workflow_id}/"
    app = create_app(store_from_url("sqlite://"), auth=True)
    calls = {
        path.removeprefix(prefix) for path in app.openapi()["paths"] if path.startswith(prefix)
    }
    assert calls == ACTIONS


def test_the_python_client_reaches_an_id_ending_in_history(stack: Stack) -> None:
    tricky = f"c-{uuid.uuid4().hex[:8]}/history"
    with stack.api(stack.admin) as admin:
        start(admin, "sum_two", {"a": 1, "b": 1}, workflow_id=tricky)
    client = Client(stack.url, token=stack.admin)
    try:
        assert client.get_run(tricky).workflow_id == tricky
    finally:
        client.close()


# -- 7. authenticate before parsing ------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "path", "content"),
    [
        ("POST", "/api/v1/runs", b"{"),
        ("GET", "/api/v1/runs?zzz=1", None),
        ("GET", "/api/v1/runs?limit=-5", None),
        ("GET", "/api/v1/no-such-route", None),
        ("POST", "/api/v1/events", b'{"payload": "\\ud800"}'),
        ("GET", "/metrics", None),
    ],
)
def test_an_anonymous_caller_gets_401_whatever_it_sends(
    stack: Stack, method: str, path: str, content: bytes | None
) -> None:
    with stack.api() as api:
        response = api.request(
            method, path, content=content, headers={"Content-Type": "application/json"}
        )
    assert error(response, 401, "unauthenticated")
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert "zzz" not in response.text and "limit" not in response.text


def test_public_routes_need_no_token(stack: Stack) -> None:
    with stack.api() as api:
        assert api.get("/healthz").status_code == 200
        assert api.get("/openapi.json").status_code == 200
        assert api.get("/docs").status_code == 200


# -- 8. the last admin token -----------------------------------------------------------------
def test_the_last_admin_token_cannot_be_revoked(tmp_path: Any) -> None:
    s = Stack(tmp_path)
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        root_id = s.admin.split("_")[1]
        with s.api(s.admin) as api:
            refused = api.delete(f"/api/v1/tokens/{root_id}")
            assert error(refused, 409, "last_admin_token")
            assert "keepgoing token create" in refused.json()["message"]
            assert api.get("/api/v1/tokens").status_code == 200  # still works
            # A non-admin token is revoked as before; so is one admin of two.
            reader = api.post(
                "/api/v1/tokens", json={"name": "r", "kind": "user", "permissions": ["runs.read"]}
            ).json()["info"]["token_id"]
            assert api.delete(f"/api/v1/tokens/{reader}").status_code == 200
            second = api.post(
                "/api/v1/tokens", json={"name": "two", "kind": "user", "permissions": ["admin"]}
            ).json()["info"]["token_id"]
            assert api.delete(f"/api/v1/tokens/{root_id}").status_code == 200
            assert api.get("/api/v1/tokens").status_code == 401  # root is revoked now
        remaining = run_store(s.store_url, _active_admins)
        assert remaining == [second]
    finally:
        s.cleanup()


async def _active_admins(store: Store) -> list[str]:
    return [t.token_id for t in await store.list_tokens() if "admin" in t.permissions]


def test_the_spec_describes_what_the_server_checks(stack: Stack) -> None:
    with stack.api() as api:
        text = api.get("/openapi.json").text
    spec = json.loads(text)
    assert "9223372036854775807" in text and "e+18" not in text
    params = {
        p["name"]: p["schema"]
        for p in spec["paths"]["/api/v1/volumes/{name}/files"]["get"]["parameters"]
    }
    assert params["prefix"]["maxLength"] == 1024
    assert params["name"]["pattern"] == NAME_PATTERN
    assert params["ref"]["pattern"] == NAME_PATTERN
    token = spec["components"]["schemas"]["TokenBody"]["properties"]["permissions"]
    assert token["items"]["enum"] == list(PERMISSIONS)
    rollback = spec["components"]["schemas"]["RollbackBody"]["properties"]
    assert rollback["version"]["maximum"] == 2**63 - 1
    assert rollback["ref"]["pattern"] == NAME_PATTERN


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/api/v1/runs", {"GET", "POST"}),
        ("/api/v1/tokens", {"GET", "POST"}),
        ("/api/v1/tokens/0123456789abcdef", {"DELETE"}),
        ("/api/v1/runs/x/cancel", {"POST"}),
    ],
)
def test_a_405_allows_every_method_of_the_path(
    admin: httpx.Client, path: str, methods: set[str]
) -> None:
    response = admin.request("OPTIONS", path)
    assert error(response, 405, "method_not_allowed")
    assert {m.strip() for m in response.headers["Allow"].split(",")} == methods
