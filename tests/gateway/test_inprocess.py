"""``keepgoing.gateway`` inside tasks with no server: the gateway runs in the task's
process on ``keepgoing.toml`` and records into the task's store; its spans (run, step,
model call) reach an in-memory OpenTelemetry exporter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import keepgoing
from keepgoing import _tracing, gateway
from keepgoing._open_store import store_from_url

from ._fakes import Fake
from ._support import OPENAI_KEY, config_text

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Find an order by its number",
            "parameters": {
                "type": "object",
                "properties": {"order": {"type": "integer"}},
                "required": ["order"],
            },
        },
    }
]


@keepgoing.task
def answer_with_tools(question: str) -> dict:
    first = gateway.chat(
        model="scripted", messages=[{"role": "user", "content": question}], tools=TOOLS
    )
    [call] = first.tool_calls
    follow = [
        {"role": "user", "content": question},
        first.message,
        {"role": "tool", "tool_call_id": call["id"], "content": "shipped on Monday"},
    ]
    second = gateway.chat(model="scripted", messages=follow, tools=TOOLS)
    return {"call": call["function"], "text": second.text}


@keepgoing.task
async def ask_async(question: str) -> str:
    answer = await gateway.achat(model="gpt", messages=[{"role": "user", "content": question}])
    return answer.text or ""


@keepgoing.workflow
async def support(question: str) -> dict:
    return await answer_with_tools(question)


@keepgoing.workflow
async def asker(question: str) -> str:
    return await ask_async(question)


@pytest.fixture
def configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fakes: tuple[Fake, Fake]
) -> Iterator[str]:
    config = tmp_path / "keepgoing.toml"
    config.write_text(config_text(*fakes))
    monkeypatch.setenv("KEEPGOING_CONFIG", str(config))
    monkeypatch.setenv("FAKE_OPENAI_KEY", OPENAI_KEY)
    monkeypatch.delenv("KEEPGOING_URL", raising=False)
    yield f"sqlite:///{tmp_path / 'kg.db'}"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _tracing.use_tracer_provider(provider)
    yield exporter
    _tracing.use_tracer_provider(None)


def _calls(url: str) -> list:
    async def read() -> list:
        store = store_from_url(url)
        await store.open()
        try:
            return await store.list_gateway_calls()
        finally:
            await store.close()

    return asyncio.run(read())


def test_tool_calls_in_a_task_are_recorded_with_the_step(configured: str) -> None:
    client = keepgoing.Client(store=configured)
    try:
        result = client.run_workflow(support, {"question": "Where is order 1042?"})
    finally:
        client.close()
    assert result["call"]["name"] == "lookup_order"
    assert json.loads(result["call"]["arguments"]) == {"order": 1042}
    assert result["text"] == "The tool returned: shipped on Monday"
    rows = _calls(configured)
    assert len(rows) == 2
    assert {(r.step, r.attempt, r.attempt_state) for r in rows} == {(1, 1, "committed")}
    assert all(r.model_answered == "keepgoing-scripted-1" and r.key_id == "" for r in rows)
    assert all(r.input_tokens > 20 and r.output_tokens > 0 for r in rows)


def test_spans_for_the_run_the_step_and_the_model_call(
    configured: str, spans: InMemorySpanExporter, fakes: tuple[Fake, Fake]
) -> None:
    client = keepgoing.Client(store=configured)
    try:
        assert client.run_workflow(asker, {"question": "capital?"}) == fakes[0].answer
    finally:
        client.close()
    finished = {s.name: s for s in spans.get_finished_spans()}
    run, step, chat = finished["run asker"], finished["step ask_async"], finished["chat gpt"]
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "gpt"
    assert attributes["gen_ai.response.model"] == "gpt-4o-mini"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        21,
        7,
    )
    assert attributes["keepgoing.step"] == 1
    assert attributes["keepgoing.run_id"] == dict(step.attributes or {})["keepgoing.run_id"]
    assert chat.parent is not None and chat.parent.span_id == step.context.span_id
    assert dict(run.attributes or {})["keepgoing.run_status"] == "completed"
    assert run.start_time is not None and step.start_time is not None
    assert run.start_time <= step.start_time
    assert OPENAI_KEY not in json.dumps([dict(s.attributes or {}) for s in finished.values()])


def test_no_tracing_means_no_opentelemetry_import() -> None:
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    code = (
        "import sys, asyncio, keepgoing\n"
        "from keepgoing import gateway\n"
        "@keepgoing.task\n"
        "def t():\n"
        "    answer = gateway.chat(model='scripted', messages=[{'role':'user','content':'hi'}])\n"
        "    return answer.text\n"
        "@keepgoing.workflow\n"
        "async def w():\n"
        "    return await t()\n"
        "print(asyncio.run(w()))\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Scripted reply" in done.stdout
