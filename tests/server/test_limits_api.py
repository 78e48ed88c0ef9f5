"""``GET /api/v1/limits``: each declared limit with its use, as the workers page shows it."""

from __future__ import annotations

from starlette.testclient import TestClient

from keepgoing._server.app import create_app
from keepgoing._store.limits_protocol import DeclaredLimit
from keepgoing._store.sqlite import SqliteStore


def test_the_limits_a_worker_declared_are_listed_with_their_use() -> None:
    store = SqliteStore(":memory:")
    app = create_app(store, auth=False, ui=False, services=False)
    declared = [
        DeclaredLimit("lookup_customer", concurrency_cap=2, keyed=True),
        DeclaredLimit("crm", rate_tokens=20, rate_period=1.0, rate_burst=5),
    ]
    with TestClient(app, base_url="http://127.0.0.1") as client:
        client.portal.call(store.record_limits, declared, 0.0)  # type: ignore[union-attr]
        body = client.get("/api/v1/limits").json()
        metrics = client.get("/metrics").text

    assert body == {
        "limits": [
            {
                "name": "crm",
                "concurrency": None,
                "keyed": False,
                "rate": "20/1s",
                "burst": 5,
                "held": 0,
                "waiting": 0,
                "tokens": 5.0,
            },
            {
                "name": "lookup_customer",
                "concurrency": 2,
                "keyed": True,
                "rate": None,
                "burst": None,
                "held": 0,
                "waiting": 0,
                "tokens": None,
            },
        ]
    }
    assert 'keepgoing_limit_slots{limit="lookup_customer"} 2.0' in metrics
    assert 'keepgoing_limit_tokens{limit="crm"} 5.0' in metrics


def test_no_limit_gives_an_empty_list() -> None:
    app = create_app(SqliteStore(":memory:"), auth=False, ui=False, services=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/api/v1/limits").json() == {"limits": []}
