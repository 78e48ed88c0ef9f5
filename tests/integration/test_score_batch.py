"""The example of DESIGN section 1, run three ways: in process, through the store, on a worker."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from types import ModuleType

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import APPS, Sandbox, Workers, of_type

pytestmark = pytest.mark.integration

INPUT = {"batch_id": "b-1", "rows": [2, 4, 6]}
EXPECTED = {"batch_id": "b-1", "rows": 3, "mean_score": pytest.approx(0.4)}


def pipeline() -> ModuleType:
    """``apps/pipeline.py``, imported once into this process (its names register globally)."""
    name = "kg_integration_pipeline"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, APPS / "pipeline.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.mark.timeout(30)
def test_in_process() -> None:
    score_batch = pipeline().score_batch

    assert asyncio.run(score_batch("b-1", [2, 4, 6])) == EXPECTED


@pytest.mark.timeout(30)
def test_run_workflow_through_the_store(kg: Sandbox, client: keepgoing.Client) -> None:
    score_batch = pipeline().score_batch

    result = client.run_workflow(score_batch, INPUT, workflow_id="batch-b-1")

    assert result == EXPECTED
    assert client.get_run("batch-b-1").status == "completed"
    history = client.history("batch-b-1")
    assert len(of_type(history, ev.TaskCompleted)) == 2
    assert len(of_type(history, ev.TimerFired)) == 1


@pytest.mark.timeout(40)
def test_on_a_worker_process(kg: Sandbox, workers: Workers, client: keepgoing.Client) -> None:
    workers.start(kg.app("pipeline"))

    result = client.trigger_workflow(
        "score_batch", INPUT, workflow_id="batch-b-1", wait=True, timeout=30
    )

    assert result == EXPECTED
    history = client.history("batch-b-1")
    assert [e.name for e in of_type(history, ev.TaskScheduled)] == ["score", "summarize"]
    assert len(of_type(history, ev.TaskCompleted)) == 2
    assert len(of_type(history, ev.TimerFired)) == 1
