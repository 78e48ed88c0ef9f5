"""``GET /api/v1/gateway/usage`` through a real server: its own permission, the ledger's
rows grouped and charted, the keys' budgets, and bad queries refused by name."""

from __future__ import annotations

import httpx
import pytest

from keepgoing._store.gateway_protocol import GatewayCall, GatewayKey

from ._support import Stack, run_store


def _row(call_id: str, at: float, **fields: object) -> GatewayCall:
    values: dict[str, object] = {
        "call_id": call_id,
        "key_id": "",
        "operation": "chat",
        "model_asked": "fast",
        "model_answered": "gpt-4o-mini",
        "provider": "openai",
        "input_tokens": 100,
        "output_tokens": 50,
        "cost": 0.125,
        "latency": 0.25,
        "ttft": None,
        "status": "ok",
        "created_at": at,
    }
    values.update(fields)
    return GatewayCall(**values)  # type: ignore[arg-type]


def test_usage_needs_gateway_read_and_reports_the_ledger(stack: Stack, admin: httpx.Client) -> None:
    key_text = stack.token("team-key", "gateway.use")
    key_id = key_text.split("_")[1]
    now = admin.get("/api/v1/gateway/usage").json()["until"]

    async def seed(store: object) -> None:
        await store.set_gateway_key(  # type: ignore[attr-defined]
            GatewayKey(token_id=key_id, daily_budget=1.0, total_budget=10.0, updated_at=now)
        )
        for n, (ago, model) in enumerate(
            ((10, "gpt-4o-mini"), (20, "gpt-4o-mini"), (3000, "claude"))
        ):
            await store.record_gateway_call(  # type: ignore[attr-defined]
                _row(f"usage-api-{n}", now - ago, key_id=key_id, model_answered=model)
            )

    run_store(stack.store_url, seed)
    reader = stack.token("finance", "gateway.read")
    with stack.api(stack.token("reader", "runs.read")) as runs_only:
        answer = runs_only.get("/api/v1/gateway/usage")
        assert answer.status_code == 403
        assert answer.json()["details"] == {"permission": "gateway.read"}
    with stack.api(reader) as api:
        body = api.get("/api/v1/gateway/usage", params={"since": now - 3600, "until": now}).json()
        assert body["group_by"] == "model"
        models = {g["model"]: (g["calls"], g["cost"]) for g in body["groups"]}
        assert models["gpt-4o-mini"] == (2, pytest.approx(0.25))
        assert models["claude"] == (1, pytest.approx(0.125))
        assert body["bucket"] == 60.0  # an hour: about 60 points
        assert sum(p["calls"] for p in body["series"]) == body["totals"]["calls"] >= 3
        [key] = [k for k in body["keys"] if k["token_id"] == key_id]
        assert key["name"] == "team-key" and key["daily_budget"] == 1.0
        assert key["spent_total"] == pytest.approx(0.375)
        assert key["left_total"] == pytest.approx(9.625)
        by_key = api.get("/api/v1/gateway/usage", params={"group_by": "key", "key_id": key_id})
        assert [(g["key_id"], g["calls"]) for g in by_key.json()["groups"]] == [(key_id, 3)]
        narrow = api.get("/api/v1/gateway/usage", params={"model": "claude", "bucket": 600})
        assert narrow.json()["totals"]["calls"] == 1 and narrow.json()["bucket"] == 600.0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"group_by": "colour"}, "query.group_by: Input should be"),
        ({"colour": "red"}, "colour"),
        ({"limit": 0}, "limit"),
    ],
)
def test_a_bad_query_is_a_400_naming_it(
    admin: httpx.Client, params: dict[str, object], message: str
) -> None:
    answer = admin.get("/api/v1/gateway/usage", params=params)
    assert answer.status_code == 400, answer.text
    assert message in answer.text


def test_a_since_after_until_is_an_empty_range(admin: httpx.Client) -> None:
    answer = admin.get("/api/v1/gateway/usage", params={"since": 100, "until": 50})
    assert answer.status_code == 200, answer.text
    assert answer.json()["totals"]["calls"] == 0 and answer.json()["groups"] == []


def test_a_bucket_too_small_for_the_range_is_widened(admin: httpx.Client) -> None:
    answer = admin.get("/api/v1/gateway/usage", params={"since": 0, "until": 1e9, "bucket": 1})
    assert answer.status_code == 200, answer.text
    assert answer.json()["bucket"] >= 1e9 / 10_000


def test_the_spec_lists_the_groupings() -> None:
    from typing import get_args  # noqa: PLC0415

    from keepgoing._server.routes.gateway_usage import GroupBy  # noqa: PLC0415
    from keepgoing._store.gateway_protocol import USAGE_GROUPS  # noqa: PLC0415

    assert set(get_args(GroupBy)) == set(USAGE_GROUPS)
