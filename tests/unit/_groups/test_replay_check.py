"""The deploy's replay check, in its real subprocess, against hostile new code."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from keepgoing._groups.replaycheck import ReplayReport, check_bounds, replay_histories, sample
from keepgoing._history import events as ev
from keepgoing._history.codec import encode
from keepgoing._store.group_records import OpenRun
from keepgoing.errors import GroupError

pytestmark = pytest.mark.timeout(60)

GOOD = """
from keepgoing import task, workflow

@task
def step() -> int:
    return 1

@workflow
async def flow() -> int:
    return await step()
"""


def history(name: str = "flow", task: str = "step", run_id: str = "r1") -> list[dict[str, Any]]:
    events: list[ev.Event] = [
        ev.WorkflowStarted(
            workflow_name=name,
            workflow_id=f"wf-{run_id}",
            run_id=run_id,
            input={"args": [], "kwargs": {}},
            code_version="",
            seq=1,
            at=1.0,
        ),
        ev.ActivationCompleted(saw_upto=1, time=1.0, seq=2, at=1.0),
        ev.TaskScheduled(cmd=1, name=task, seq=3, at=1.0),
    ]
    return [encode(e) for e in events]


def run(run_id: str = "r1", name: str = "flow", created: float = 1.0) -> OpenRun:
    return OpenRun(run_id, f"wf-{run_id}", name, 1, "running", 4, created)


def check(
    source: str, cases: list[tuple[OpenRun, list[dict[str, Any]]]], **kw: Any
) -> ReplayReport:
    return asyncio.run(replay_histories(cases, source=source, filename="app.py", **kw))


def test_a_history_that_replays_passes_and_one_that_does_not_has_its_diff() -> None:
    renamed = GOOD.replace("def step", "def step_two").replace("await step()", "await step_two()")
    report = check(renamed, [(run(), history())])
    (failure,) = report.failures
    assert failure.run_id == "r1" and "TaskScheduled #1 step" in (failure.error or "")
    assert "step_two" in (failure.error or "")
    assert check(GOOD, [(run(), history())]).failures == ()


def test_code_that_does_not_import_is_refused_with_why() -> None:
    for source, why in (
        ("def broken(:\n", "SyntaxError"),
        ("raise RuntimeError('no config here')\n", "no config here"),
        ("import sys\nsys.exit(3)\n", "SystemExit"),
    ):
        with pytest.raises(GroupError, match="does not import") as caught:
            check(source, [(run(), history())])
        assert why in str(caught.value)


def test_code_that_prints_while_importing_does_not_confuse_the_check() -> None:
    noisy = "print('hello from import')\nimport sys\nprint('x' * 100000, file=sys.stderr)\n"
    assert check(noisy + GOOD, [(run(), history())]).failures == ()


def test_replay_that_hangs_is_cut_by_the_time_limit_and_reported() -> None:
    hangs = GOOD.replace("return await step()", "while True:\n        pass")
    report = check(hangs, [(run("a"), history(run_id="a"))], time_limit=2.0)
    assert report.checked == () and report.out_of_time == ("a",)
    assert "out of time" in report.bound()


def test_a_workflow_the_new_code_lacks_is_that_runs_failure() -> None:
    report = check(GOOD, [(run(name="gone"), history(name="gone"))])
    (failure,) = report.failures
    assert "defines no workflow 'gone'" in (failure.error or "")


def test_the_sample_is_newest_first_per_workflow_and_the_bound_is_reported() -> None:
    runs = [run(f"r{i}", created=float(i)) for i in range(5)] + [run("o", name="other")]
    chosen, left = sample(runs, 2)
    assert [r.run_id for r in chosen] == ["r4", "r3", "o"]
    assert left == {"flow": 3}
    report = ReplayReport(not_sampled=left, per_name=2)
    assert "not sampled: 3 of flow" in report.bound()
    assert ReplayReport.from_body(report.to_body()) == report


@pytest.mark.parametrize(
    ("per_name", "limit"), [(0, 1.0), (True, 1.0), (10001, 1.0), (5, 0), (5, -1), (5, 4000)]
)
def test_bad_bounds_are_refused(per_name: Any, limit: Any) -> None:
    with pytest.raises(GroupError):
        check_bounds(per_name, limit)


def test_force_deploys_code_the_check_cannot_import_and_keeps_every_run_pinned(
    tmp_path: Path,
) -> None:
    from keepgoing._client.deploy import build_plan  # noqa: PLC0415
    from keepgoing._groups.upgrade import DeployOptions, deploy_plan  # noqa: PLC0415
    from keepgoing._store.records import StartRequest  # noqa: PLC0415
    from keepgoing._store.sqlite import SqliteStore  # noqa: PLC0415

    app = tmp_path / "app.py"
    app.write_text(GOOD)
    first = build_plan(app, name="wf-app")
    app.write_text("import a_module_nobody_has\n" + GOOD)
    broken = build_plan(app, name="wf-app", upgrade="auto")

    async def scenario() -> None:
        store = SqliteStore(str(tmp_path / "kg.db"))
        await store.open()
        try:
            await deploy_plan(store, first, now=1.0)
            start = StartRequest("r1", "wf-1", "flow", {}, "workflows.wf-app", "", 1.0)
            await store.start_run(start)
            with pytest.raises(GroupError, match="does not import"):
                await deploy_plan(store, broken, now=2.0)
            forced = await deploy_plan(store, broken, now=3.0, options=DeployOptions(force=True))
            assert forced.revisions["wf-app"] == 2 and forced.moved == ()
            assert "a_module_nobody_has" in forced.pinned["r1"]
            run = await store.get_run("r1")
            assert run is not None and run.group_revision == 1
        finally:
            await store.close()

    asyncio.run(scenario())


ARGS = """
from keepgoing import task, workflow

@task
def step(pair: tuple[int, int], note: str = "") -> int:
    return 1

@workflow
async def flow(x: int) -> int:
    return await step((x, x), note="n")
"""


def argued(x: int, recorded: int) -> list[dict[str, Any]]:
    events: list[ev.Event] = [
        ev.WorkflowStarted(
            workflow_name="flow",
            workflow_id="wf-r1",
            run_id="r1",
            input={"args": [x], "kwargs": {}},
            code_version="",
            seq=1,
            at=1.0,
        ),
        ev.ActivationCompleted(saw_upto=1, time=1.0, seq=2, at=1.0),
        ev.TaskScheduled(
            cmd=1, name="step", args=[[recorded, recorded]], kwargs={"note": "n"}, seq=3, at=1.0
        ),
    ]
    return [encode(e) for e in events]


def test_strict_arguments_name_the_first_step_a_new_input_changes() -> None:
    assert check(ARGS, [(run(), argued(1, 1))], strict_args=True).failures == ()
    # Without strict_args, replay matches by name and number only.
    assert check(ARGS, [(run(), argued(2, 1))]).failures == ()
    (failure,) = check(ARGS, [(run(), argued(2, 1))], strict_args=True).failures
    assert "step 1 step was recorded with pair=[1, 1], the new input schedules pair=[2, 2]" in (
        failure.error or ""
    )
    assert "fork from step 1 or earlier" in (failure.error or "")
