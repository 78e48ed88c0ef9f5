"""``keepgoing gateway models | keys | usage`` on a real store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ._support import cli_env, run_store

pytestmark = pytest.mark.integration


def kg(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", *args],
        cwd=root,
        env={**cli_env(root), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_keys_models_and_usage(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'kg.db'}"
    made = kg(
        tmp_path,
        "gateway",
        "keys",
        "create",
        "--name",
        "bot",
        "--models",
        "scripted",
        "--daily-budget",
        "2",
        "--store",
        store,
        "--json",
    )
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    token_id = created["key"]["token_id"]
    assert created["token"].startswith(f"kg_{token_id}_")
    changed = kg(tmp_path, "gateway", "keys", "set", token_id, "--rpm", "5", "--store", store)
    assert changed.returncode == 0 and "rpm 5" in changed.stdout and "daily $ 2" in changed.stdout
    key = run_store(store, lambda s: s.get_gateway_key(token_id))
    assert (key.models, key.requests_per_minute, key.daily_budget) == (("scripted",), 5, 2.0)
    listed = json.loads(kg(tmp_path, "gateway", "keys", "list", "--store", store, "--json").stdout)
    assert [k["token_id"] for k in listed] == [token_id]

    config = tmp_path / "keepgoing.toml"
    config.write_text(
        '[gateway.providers.oa]\ntype = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'api_key_env = "PLANTED_KEY"\n[gateway.models.fast]\nprovider = "oa"\nmodel = "gpt-4o"\n'
    )
    models = kg(tmp_path, "gateway", "models", "--json", env={"PLANTED_KEY": "sk-do-not-print"})
    assert models.returncode == 0, models.stderr
    shown = json.loads(models.stdout)
    assert {m["model"] for m in shown["models"]} == {"fast", "scripted"}
    fast = next(m for m in shown["models"] if m["model"] == "fast")
    assert fast["key"] == "PLANTED_KEY (set)" and fast["price_input"] == 2.5
    assert "sk-do-not-print" not in models.stdout + models.stderr

    usage = kg(tmp_path, "gateway", "usage", "--since", "7d", "--store", store, "--json")
    assert usage.returncode == 0 and json.loads(usage.stdout) == []


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'kg.db'}"
    missing = kg(
        tmp_path, "gateway", "keys", "set", "0123456789abcdef", "--rpm", "1", "--store", store
    )
    assert missing.returncode == 1 and "no token has id" in missing.stderr
    no_group = kg(
        tmp_path, "gateway", "keys", "set", "group:wf-nope", "--total-budget", "1", "--store", store
    )
    assert no_group.returncode == 1 and "no group is named 'wf-nope'" in no_group.stderr
    (tmp_path / "keepgoing.toml").write_text("[gateway]\nprompts = 'sometimes'\n")
    bad = kg(tmp_path, "gateway", "models")
    assert bad.returncode == 2 and "gateway.prompts must be" in bad.stderr
    since = kg(tmp_path, "gateway", "usage", "--since", "yesterday", "--store", store)
    assert since.returncode == 2, since.stderr


def test_usage_grouped_by_workflow_and_key(tmp_path: Path) -> None:
    import time  # noqa: PLC0415

    from keepgoing._store.gateway_protocol import GatewayCall  # noqa: PLC0415

    store = f"sqlite:///{tmp_path / 'kg.db'}"

    async def seed(s: object) -> None:
        now = time.time()
        for n, key in enumerate(("k1", "k1", "k2")):
            await s.record_gateway_call(  # type: ignore[attr-defined]
                GatewayCall(
                    call_id=f"cli-{n}",
                    key_id=key,
                    operation="chat",
                    model_asked="fast",
                    model_answered="gpt-4o-mini",
                    provider="openai",
                    input_tokens=10,
                    output_tokens=5,
                    cost=0.5,
                    latency=0.1,
                    ttft=None,
                    status="ok",
                    created_at=now - n,
                )
            )

    run_store(store, seed)
    by_key = kg(tmp_path, "gateway", "usage", "--by", "key", "--store", store, "--json")
    assert by_key.returncode == 0, by_key.stderr
    body = json.loads(by_key.stdout)
    assert {g["key_id"]: g["calls"] for g in body["groups"]} == {"k1": 2, "k2": 1}
    assert body["totals"]["cost"] == 1.5
    table = kg(tmp_path, "gateway", "usage", "--by", "workflow", "--store", store)
    assert table.returncode == 0 and "usage by workflow" in table.stdout
    bad = kg(tmp_path, "gateway", "usage", "--by", "colour", "--store", store)
    assert bad.returncode == 1 and "group_by must be one of" in bad.stderr
