"""``GET /api/v1/retention``: the policies the runs list reads to say when a run goes."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from keepgoing._server.app import create_app
from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.retention import RetentionPolicy
from retention_support import write_archived


def test_the_policies_in_force() -> None:
    store = SqliteStore(":memory:")
    policy = RetentionPolicy(runs=3600.0, archive="arch")
    app = create_app(store, auth=False, ui=False, groups=False, retention=policy)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        client.portal.call(store.record_retention, {"nightly": 60.0, "other": None}, 0.0)  # type: ignore[union-attr]
        body = client.get("/api/v1/retention").json()

    assert body == {
        "runs": 3600.0,
        "audit": 365 * 86400.0,
        "archive": True,
        "workflows": {"nightly": 60.0, "other": None},
    }


def test_off_without_services() -> None:
    app = create_app(SqliteStore(":memory:"), auth=False, ui=False, services=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        body = client.get("/api/v1/retention").json()

    assert body["runs"] is None and body["archive"] is False and body["workflows"] == {}


def test_an_archived_run_is_served_from_the_archive(tmp_path: Path) -> None:
    write_archived(tmp_path, "r1", "nightly-1", {"n": 1})
    policy = RetentionPolicy(runs=60.0, archive=str(tmp_path))
    app = create_app(SqliteStore(":memory:"), auth=False, ui=False, groups=False, retention=policy)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        by_run = client.get("/api/v1/archive/r1")
        by_workflow = client.get("/api/v1/archive/nightly-1")
        missing = client.get("/api/v1/archive/nope")

    assert by_run.status_code == 200 and by_run.json()["run"]["result"] == {"n": 1}
    assert by_run.json()["archived"] is True and len(by_run.json()["events"]) == 1
    assert by_workflow.json() == by_run.json()
    assert missing.status_code == 404 and missing.json()["code"] == "run_not_found"


def test_an_archived_run_is_served_from_an_fsspec_url() -> None:
    import uuid  # noqa: PLC0415

    root = f"memory://kg-api-{uuid.uuid4().hex}"
    write_archived(root, "r1", "nightly-1", {"n": 1})
    policy = RetentionPolicy(runs=60.0, archive=root)
    app = create_app(SqliteStore(":memory:"), auth=False, ui=False, groups=False, retention=policy)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        by_workflow = client.get("/api/v1/archive/nightly-1")

    assert by_workflow.status_code == 200 and by_workflow.json()["run"]["result"] == {"n": 1}
