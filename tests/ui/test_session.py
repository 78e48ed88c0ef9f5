"""The session without a browser: cookie flags, CSRF, redirects, Host and Origin checks.

Against a real ``keepgoing server`` (with and without authentication).
"""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Iterator

import httpx
import pytest
from fastapi.routing import APIRoute

from keepgoing._server.ui.pages import router
from keepgoing._server.ui.session import COOKIE, PAGES, csrf_token

from ._stack import UiStack


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiStack]:
    """A server with authentication and no worker (sessions need none)."""
    s = UiStack(tmp_path_factory.mktemp("session"))
    try:
        s.admin = s.token("root", "admin")
        s.start_server()
        yield s
    finally:
        s.cleanup()


def _csrf(client: httpx.Client) -> str:
    """The CSRF token of the client's session (keyed by its cookie's value)."""
    return csrf_token(client.cookies[COOKIE])


@contextlib.contextmanager
def _signed_in(s: UiStack, token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=s.url, timeout=30) as client:
        answer = client.post("/signin", data={"token": token, "next": "/audit"})
        assert answer.status_code == 303, answer.text
        yield client


def test_signing_in_sets_an_httponly_strict_cookie(bare: UiStack) -> None:
    with httpx.Client(base_url=bare.url, timeout=30) as client:
        answer = client.post("/signin", data={"token": bare.admin, "next": "/audit"})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/audit"
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=kgs_")  # a session's id, never the token
        assert bare.admin not in cookie and bare.admin.split("_")[2] not in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # plain http here; https sets Secure
        page = client.get("/")
        assert page.status_code == 200 and "Sign out" in page.text
        assert _csrf(client) in page.text  # the page carries the CSRF token


def test_a_page_without_a_session_redirects_to_sign_in(bare: UiStack) -> None:
    answer = httpx.get(f"{bare.url}/run?id=x", timeout=30)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/signin?next=%2Frun%3Fid%3Dx"
    # The API itself still answers 401 JSON, not a redirect.
    api = httpx.get(f"{bare.url}/api/v1/runs", timeout=30)
    assert api.status_code == 401 and api.json()["code"] == "unauthenticated"
    # Nor does anything that is not one of the UI's pages: the model gateway, a typo.
    for path in ("/v1/models", "/nowhere", "/runs"):
        other = httpx.get(f"{bare.url}{path}", headers={"accept": "text/html"}, timeout=30)
        assert other.status_code == 401, (path, other.status_code)
        assert other.headers["content-type"].startswith("application/json")


def test_the_session_knows_every_page_of_the_ui() -> None:
    routes = {route.path for route in router.routes if isinstance(route, APIRoute)}
    assert routes == PAGES


def test_a_bad_token_is_refused_with_the_reason(bare: UiStack) -> None:
    answer = httpx.post(f"{bare.url}/signin", data={"token": "nope"}, timeout=30)
    assert answer.status_code == 401
    assert "not a keepgoing token" in answer.text
    assert "set-cookie" not in answer.headers
    forged = "kg_0123456789abcdef_" + "x" * 30
    answer = httpx.post(f"{bare.url}/signin", data={"token": forged}, timeout=30)
    assert answer.status_code == 401 and "not valid" in answer.text


def test_a_revoked_token_ends_the_session(bare: UiStack) -> None:
    token = bare.token("short-lived", "runs.read")
    with _signed_in(bare, token) as client:
        assert client.get("/").status_code == 200
        token_id = token.split("_")[1]
        with bare.api(bare.admin) as admin:
            admin.delete(f"/api/v1/tokens/{token_id}").raise_for_status()
        answer = client.get("/")
        assert answer.status_code == 303 and answer.headers["location"].startswith("/signin")
        assert "Max-Age=0" in answer.headers["set-cookie"]


def test_sign_in_never_redirects_off_site(bare: UiStack) -> None:
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:x"):
        answer = httpx.post(
            f"{bare.url}/signin", data={"token": bare.admin, "next": target}, timeout=30
        )
        assert answer.status_code == 303 and answer.headers["location"] == "/", target


def test_sign_in_from_another_site_is_refused(bare: UiStack) -> None:
    answer = httpx.post(
        f"{bare.url}/signin",
        data={"token": bare.admin},
        headers={"Origin": "http://evil.example"},
        timeout=30,
    )
    assert answer.status_code == 403 and "set-cookie" not in answer.headers


def test_a_change_with_the_cookie_needs_the_csrf_token(bare: UiStack) -> None:
    with _signed_in(bare, bare.admin) as client:
        body = {"workflow": "support", "workflow_id": "csrf-1", "input": {"ticket": "c"}}
        refused = client.post("/api/v1/runs", json=body)
        assert refused.status_code == 403 and refused.json()["code"] == "csrf_failed"
        wrong = client.post("/api/v1/runs", json=body, headers={"X-CSRF-Token": "0" * 64})
        assert wrong.status_code == 403 and wrong.json()["code"] == "csrf_failed"
        foreign = client.post(
            "/api/v1/runs",
            json=body,
            headers={"X-CSRF-Token": _csrf(client), "Origin": "http://evil.example"},
        )
        assert foreign.status_code == 403 and foreign.json()["code"] == "origin_not_allowed"
        assert client.get("/api/v1/runs/csrf-1").status_code == 404  # nothing was started
        ok = client.post("/api/v1/runs", json=body, headers={"X-CSRF-Token": _csrf(client)})
        assert ok.status_code == 201, ok.text
        # The audit log names the session's token, not an anonymous caller.
        entries = client.get("/api/v1/audit", params={"workflow_id": "csrf-1"}).json()["entries"]
        assert [(e["actor_id"], e["action"]) for e in entries] == [("root", "workflow.trigger")]


def test_sign_out_takes_the_form_field(bare: UiStack) -> None:
    with _signed_in(bare, bare.admin) as client:
        refused = client.post("/signout", data={})
        assert refused.status_code == 403 and refused.json()["code"] == "csrf_failed"
        answer = client.post("/signout", data={"csrf_token": _csrf(client)})
        assert answer.status_code == 303 and "Max-Age=0" in answer.headers["set-cookie"]


def test_a_hostile_csrf_form_field_is_403_not_a_crash(bare: UiStack) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    with _signed_in(bare, bare.admin) as client:
        for body in (
            "csrf_token=%E2%82%AC",  # a character Latin-1 cannot hold
            "csrf_token=%FF%FE",  # not UTF-8
            f"csrf_token=bad&csrf_token={_csrf(client)}",  # the first value counts
            "csrf_token",  # no value at all
            "&" * 5000,  # many empty fields
        ):
            refused = client.post("/signout", content=body, headers=form)
            assert refused.status_code == 403, (body[:40], refused.text)
            assert refused.json()["code"] == "csrf_failed"
        many = "&".join(f"f{i}=x" for i in range(3000)) + f"&csrf_token={_csrf(client)}"
        answer = client.post("/signout", content=many, headers=form)
        assert answer.status_code == 303, answer.text


def test_sign_in_reads_its_form_fields_once_each(bare: UiStack) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    with httpx.Client(base_url=bare.url, timeout=30) as client:
        body = f"token={bare.admin}&next=%2Faudit&next=%2Felsewhere&token=wrong"
        answer = client.post("/signin", content=body, headers=form)
        assert answer.status_code == 303 and answer.headers["location"] == "/audit"
    with httpx.Client(base_url=bare.url, timeout=30) as client:
        blank = client.post("/signin", content=f"token={bare.admin}&next=", headers=form)
        assert blank.status_code == 303 and blank.headers["location"] == "/"


def test_sign_out_ends_the_session_on_the_server(bare: UiStack) -> None:
    """A copy of the cookie taken before signing out is worth nothing after it."""
    with _signed_in(bare, bare.admin) as client:
        copied = client.cookies[COOKIE]
        csrf = _csrf(client)
        assert client.post("/signout", data={"csrf_token": csrf}).status_code == 303
    with httpx.Client(base_url=bare.url, timeout=30, cookies={COOKIE: copied}) as thief:
        page = thief.get("/")
        assert page.status_code == 303 and page.headers["location"].startswith("/signin")
        api = thief.get("/api/v1/runs")
        assert api.status_code == 401
        refused = thief.post("/api/v1/runs", json={}, headers={"X-CSRF-Token": csrf})
        assert refused.status_code == 401
    # Nor is the raw token a session cookie any more.
    with httpx.Client(base_url=bare.url, timeout=30, cookies={COOKIE: bare.admin}) as old:
        assert old.get("/api/v1/runs").status_code == 401


def test_a_token_may_not_do_what_it_lacks_through_the_session(bare: UiStack) -> None:
    reader = bare.token("reader-s", "runs.read")
    with _signed_in(bare, reader) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert 'href="/audit"' not in page.text  # admin-only pages are not offered
        answer = client.post(
            "/api/v1/runs",
            json={"workflow": "support", "input": {}},
            headers={"X-CSRF-Token": _csrf(client)},
        )
        assert answer.status_code == 403 and answer.json()["code"] == "permission_denied"


def test_static_files_need_no_token_and_cannot_escape(bare: UiStack) -> None:
    assert httpx.get(f"{bare.url}/ui/static/kg.css", timeout=30).status_code == 200
    host, port = bare.url.removeprefix("http://").split(":")
    for path in ("/ui/static/../../_server/auth.py", "/ui/static/%2e%2e/%2e%2e/_server/auth.py"):
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request("GET", path)  # sent as it is: http.client does not normalise
            answer = conn.getresponse()
            body = answer.read()
        finally:
            conn.close()
        assert answer.status in (401, 404), path
        assert b"authenticate" not in body


def test_without_auth_a_banner_and_a_lying_host_is_refused(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    s = UiStack(tmp_path_factory.mktemp("noauth"))
    try:
        s.start_server("--no-auth")
        page = httpx.get(f"{s.url}/", timeout=30)
        assert page.status_code == 200
        assert "runs without authentication" in page.text
        lying = httpx.get(f"{s.url}/", headers={"Host": "evil.example"}, timeout=30)
        assert lying.status_code == 403 and lying.json()["code"] == "host_not_allowed"
        cross = httpx.post(
            f"{s.url}/api/v1/runs",
            json={"workflow": "support", "input": {}},
            headers={"Origin": "http://evil.example"},
            timeout=30,
        )
        assert cross.status_code == 403 and cross.json()["code"] == "origin_not_allowed"
        signin = httpx.get(f"{s.url}/signin", timeout=30)
        assert "nothing to sign in to" in signin.text
    finally:
        s.cleanup()
