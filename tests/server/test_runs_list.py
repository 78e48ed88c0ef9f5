"""The runs list over HTTP: filters, keyset cursors, counts, and bad input as 400s."""

from __future__ import annotations

import httpx
import pytest

from keepgoing._store.trouble import MARKERS

from ._support import Stack
from .test_api import _id, result, start

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _pages(api: httpx.Client, **params: object) -> list[str]:
    seen: list[str] = []
    cursor = None
    for _ in range(50):
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = api.get("/api/v1/runs", params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        seen += [r["workflow_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("the pages never ended")


def test_filters_cursor_and_counts(admin: httpx.Client, stack: Stack) -> None:
    tag = _id("lst")
    ids = [f"{tag}-{n}" for n in range(4)]
    for n, workflow_id in enumerate(ids):
        start(admin, "sum_two", {"a": n, "b": 1}, workflow_id=workflow_id)
        result(admin, workflow_id)
    bad = f"{tag}-broken"
    start(admin, "broken", None, workflow_id=bad)
    assert result(admin, bad)["status"] == "failed"

    assert _pages(admin, id=tag, limit=2) == [bad, *reversed(ids)]
    assert _pages(admin, id=tag, status="completed", limit=3) == list(reversed(ids))
    assert _pages(admin, id=tag, status="completed,failed", limit=1) == [bad, *reversed(ids)]
    assert _pages(admin, id=tag, status=["failed", "running"]) == [bad]
    assert _pages(admin, q="BROKEN ON PURPOSE")[:1] == [bad]  # the error's message
    assert _pages(admin, q=tag.upper(), workflow="sum_two") == list(reversed(ids))
    counts = admin.get("/api/v1/run-counts", params={"id": tag}).json()
    nothing = dict.fromkeys(MARKERS, 0)
    assert counts == {"counts": {"completed": 4, "failed": 1}, "total": 5, "trouble": nothing}
    created = admin.get(f"/api/v1/runs/{ids[1]}").json()["created_at"]
    assert _pages(admin, id=tag, until=created) == [ids[0]]
    assert _pages(admin, id=tag, since=created, status="completed") == [ids[3], ids[2], ids[1]]
    # Old clients still page by offset.
    old = admin.get("/api/v1/runs", params={"workflow": "sum_two", "limit": 1, "offset": 0})
    assert old.json()["next_offset"] == 1


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"status": "nope"}, "unknown status 'nope'"),
        ({"status": "running,zzz"}, "unknown status 'zzz'"),
        ({"cursor": "garbage!!"}, "not one this server handed out"),
        ({"cursor": "WyJhIiwxXQ"}, "out of range"),
        ({"since": 10, "until": 5}, "since (10) is after until (5)"),
        ({"limit": 100000}, "limit"),
        ({"limit": 0}, "limit"),
        ({"since": -1}, "since"),
        ({"cursor": "WzEsMl0", "offset": 3}, "either cursor or offset"),
        ({"stauts": "failed"}, "unknown query parameter"),
    ],
)
def test_bad_input_is_a_clear_400(
    admin: httpx.Client, params: dict[str, object], says: str
) -> None:
    for path in ("/api/v1/runs", "/api/v1/run-counts"):
        if path.endswith("counts") and ("cursor" in params or "limit" in params):
            continue
        response = admin.get(path, params=params)
        assert response.status_code == 400, response.text
        assert says in response.text


def test_reading_runs_needs_runs_read(stack: Stack) -> None:
    nobody = stack.token("nobody", "messages.send")
    with stack.api(nobody) as api:
        assert api.get("/api/v1/run-counts").status_code == 403
        assert api.get("/api/v1/runs").status_code == 403


def test_a_workflow_named_like_a_route_is_still_a_run(admin: httpx.Client) -> None:
    # The counts live outside /runs/: every path under it is a run's.
    start(admin, "sum_two", {"a": 1, "b": 1}, workflow_id="counts")
    assert result(admin, "counts")["status"] == "completed"
    run = admin.get("/api/v1/runs/counts")
    assert run.status_code == 200, run.text
    assert run.json()["workflow_id"] == "counts"
