"""The background orchestrator's rules: where its files go, its idle stretch, and when
a store counts as idle (its files and processes are tested in tests/integration)."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

import keepgoing
from keepgoing._client import orchestrator as background
from keepgoing._client.deploy import build_plan
from keepgoing.errors import ConfigurationError

APP = textwrap.dedent(
    """
    from keepgoing import workflow

    @workflow
    async def idle_probe() -> int:
        return 1
    """
)


def test_its_files_sit_beside_the_projects_store(tmp_path: Path) -> None:
    db = tmp_path / "app" / ".keepgoing" / "keepgoing.db"
    assert background.state_folder(f"sqlite:///{db}") == db.parent / "orchestrator"


def test_a_store_elsewhere_keeps_them_in_the_project_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".keepgoing").mkdir()
    monkeypatch.chdir(tmp_path)
    expected = tmp_path / ".keepgoing" / "orchestrator"
    assert background.state_folder("sqlite:////var/data/runs.db") == expected
    assert background.state_folder("postgresql://u@db/kg") == expected


def test_nothing_runs_until_a_deploy_starts_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / '.keepgoing' / 'kg.db'}"
    found = background.find_orchestrator(url)
    assert (found.running, found.pid) == (False, None)
    assert background.stop_orchestrator(url) is False


@pytest.mark.parametrize(
    ("value", "env", "expected"),
    [(None, None, 300.0), (None, "12.5", 12.5), (30, "12.5", 30.0)],
)
def test_the_idle_stretch(
    monkeypatch: pytest.MonkeyPatch, value: float | None, env: str | None, expected: float
) -> None:
    if env is None:
        monkeypatch.delenv("KEEPGOING_ORCHESTRATOR_IDLE", raising=False)
    else:
        monkeypatch.setenv("KEEPGOING_ORCHESTRATOR_IDLE", env)
    assert background.idle_seconds(value) == expected


@pytest.mark.parametrize("bad", ["soon", "0", "-3", "nan", "inf"])
def test_a_bad_idle_stretch_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("KEEPGOING_ORCHESTRATOR_IDLE", bad)
    with pytest.raises(ConfigurationError, match="seconds"):
        background.idle_seconds()


@pytest.mark.parametrize(("text", "on"), [("off", False), ("0", False), ("on", True), ("", True)])
def test_the_switch(monkeypatch: pytest.MonkeyPatch, text: str, on: bool) -> None:
    monkeypatch.setenv("KEEPGOING_ORCHESTRATOR", text)
    assert background.enabled() is on


def test_a_store_is_idle_with_no_open_run_on_a_groups_queue(
    client: keepgoing.Client, tmp_path: Path
) -> None:
    store = client.store
    run = client.groups._s.run  # the client's own loop

    def idle() -> bool:
        return bool(run(background.store_is_idle(store, time.time())))

    assert idle()  # no group at all
    source = tmp_path / "idle_app.py"
    source.write_text(APP)
    client.groups.deploy(build_plan(source, name="wf-idle"))
    assert idle()  # deployed, at zero, nothing queued
    client.trigger_workflow("unrelated", task_queue="default")
    assert idle()  # a run on another queue is not the group's work
    handle = client.trigger_workflow("idle_probe", task_queue="workflows.wf-idle")
    assert not idle()  # queued on the group's queue
    # A cancel is work too: a worker of the group must end the run.
    client.cancel_workflow(handle.workflow_id)
    assert not idle()
