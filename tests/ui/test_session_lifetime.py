"""A session's lifetime on the server's clock: idle and absolute limits, and the
``__Host-`` cookie over https. In process, with a clock the test moves."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from keepgoing._server import tokens
from keepgoing._server.app import create_app
from keepgoing._server.ui.session import COOKIE, SECURE_COOKIE
from keepgoing._store.sqlite import SqliteStore

IDLE, LIFETIME = 600.0, 3600.0


class MovedClock:
    def __init__(self) -> None:
        self.at = 1_900_000_000.0

    def now(self) -> float:
        return self.at

    def monotonic(self) -> float:
        return self.at


def _token(path: Path) -> str:
    async def make() -> str:
        store = SqliteStore(str(path))
        await store.open()
        try:
            _, text = await tokens.create_token(
                store,
                name="root",
                kind="user",
                permissions=["admin"],
                actor_kind="user",
                actor_id="test-setup",
                now=1_900_000_000.0,
            )
            return str(text)
        finally:
            await store.close()

    return asyncio.run(make())


@pytest.fixture
def clock() -> MovedClock:
    return MovedClock()


@pytest.fixture
def app_and_token(tmp_path: Path, clock: MovedClock) -> tuple[object, str]:
    path = tmp_path / "kg.db"
    token = _token(path)
    app = create_app(
        SqliteStore(str(path)),
        services=False,
        clock=clock,
        session_idle=IDLE,
        session_lifetime=LIFETIME,
    )
    return app, token


@pytest.fixture
def http(app_and_token: tuple[object, str]) -> Iterator[TestClient]:
    app, _ = app_and_token
    with TestClient(app, base_url="http://127.0.0.1:8711", follow_redirects=False) as client:  # type: ignore[arg-type]
        yield client


def _sign_in(client: TestClient, token: str) -> None:
    answer = client.post("/signin", data={"token": token, "next": "/"})
    assert answer.status_code == 303, answer.text


def _signed_in(client: TestClient) -> bool:
    return client.get("/api/v1/runs").status_code == 200


def test_an_idle_session_ends(
    http: TestClient, app_and_token: tuple[object, str], clock: MovedClock
) -> None:
    _sign_in(http, app_and_token[1])
    clock.at += IDLE - 1
    assert _signed_in(http)  # used just in time: its idle time starts again
    clock.at += IDLE - 1
    assert _signed_in(http)
    clock.at += IDLE + 1
    assert not _signed_in(http)
    page = http.get("/")
    assert page.status_code == 303 and page.headers["location"].startswith("/signin")


def test_a_session_in_use_still_ends_at_its_lifetime(
    http: TestClient, app_and_token: tuple[object, str], clock: MovedClock
) -> None:
    _sign_in(http, app_and_token[1])
    started = clock.at
    while clock.at + IDLE / 2 < started + LIFETIME:
        clock.at += IDLE / 2
        assert _signed_in(http)
    clock.at = started + LIFETIME
    assert not _signed_in(http)
    _sign_in(http, app_and_token[1])  # signing in again starts a new one
    assert _signed_in(http)


def test_over_https_the_cookie_is_host_prefixed_and_secure(
    app_and_token: tuple[object, str],
) -> None:
    app, token = app_and_token
    with TestClient(app, base_url="https://127.0.0.1", follow_redirects=False) as client:  # type: ignore[arg-type]
        answer = client.post("/signin", data={"token": token, "next": "/"})
        assert answer.status_code == 303
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith(f"{SECURE_COOKIE}=kgs_")
        flags = [f.strip() for f in cookie.split(";")[1:]]
        assert {"Path=/", "Secure", "HttpOnly", "SameSite=Strict"} <= set(flags)
        assert not [f for f in flags if f.lower().startswith("domain")]
        assert client.get("/api/v1/runs").status_code == 200
        value = client.cookies[SECURE_COOKIE]
        client.cookies.clear()
        # Over https only the __Host- cookie counts: a plain one (which any sibling
        # domain or a plain-http page could have set) is no session.
        client.cookies.set(COOKIE, value)
        assert client.get("/api/v1/runs").status_code == 401


def test_every_answer_says_nosniff_and_the_pages_connect_only_home(
    http: TestClient, app_and_token: tuple[object, str]
) -> None:
    for path in ("/healthz", "/api/v1/runs", "/signin", "/docs", "/openapi.json", "/nowhere"):
        assert http.get(path).headers["x-content-type-options"] == "nosniff", path
    policy = http.get("/signin").headers["content-security-policy"]
    assert "connect-src 'self';" in policy and "*" not in policy
    docs = http.get("/docs")
    assert docs.status_code == 200 and "/v1/chat/completions" in docs.text
    assert "<script" not in docs.text and "https://" not in docs.text
    assert docs.headers["content-security-policy"].startswith("default-src 'none'")
