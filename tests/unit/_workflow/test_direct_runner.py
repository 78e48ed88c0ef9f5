"""Direct calls reach the engine through the hook the package installs at import."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import keepgoing
from keepgoing._worker.inprocess import run_in_process
from keepgoing._workflow import runner
from keepgoing._workflow.workflow import WorkflowDefinition


@pytest.fixture
def restore_runner() -> Iterator[None]:
    installed = runner.direct_runner()
    try:
        yield
    finally:
        runner.install_direct_runner(installed)


@keepgoing.workflow(name="direct-runner-double")
async def double(n: int) -> int:
    return n * 2


def test_importing_keepgoing_installs_the_in_process_runner() -> None:
    assert runner.direct_runner() is run_in_process


async def test_awaiting_a_workflow_runs_it_on_the_installed_runner() -> None:
    assert await double(21) == 42


@pytest.mark.usefixtures("restore_runner")
async def test_a_direct_call_goes_to_whatever_runner_is_installed() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def recording(definition: WorkflowDefinition[..., Any], inputs: dict[str, Any]) -> Any:
        seen.append((definition.name, inputs))
        return "recorded"

    runner.install_direct_runner(recording)
    assert await double(4) == "recorded"  # type: ignore[comparison-overlap]
    assert seen == [("direct-runner-double", {"args": [4], "kwargs": {}})]


@pytest.mark.usefixtures("restore_runner")
def test_without_a_runner_a_direct_call_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runner, "_runner", None)
    with pytest.raises(RuntimeError, match="no direct-call runner is installed"):
        double(1).close()
