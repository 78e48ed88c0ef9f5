"""``keepgoing.patched`` / ``deprecate_patch``: Temporal's semantics on our replay."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import keepgoing
from keepgoing import NondeterminismError, task
from keepgoing._history import events as ev
from keepgoing._history.codec import decode, encode

from .._sim import Sim, commands_of, replay_fresh

MakeSim = Callable[..., Sim]


@task(name="patch.old")
def old_step() -> str:
    return "old"


@task(name="patch.new")
def new_step() -> str:
    return "new"


@task(name="patch.after")
def after_step() -> str:
    return "after"


async def v1() -> list[str]:
    return [await old_step(), await after_step()]


async def v2() -> list[str]:
    first = await new_step() if keepgoing.patched("swap") else await old_step()
    return [first, await after_step()]


async def v3() -> list[str]:
    keepgoing.deprecate_patch("swap")
    return [await new_step(), await after_step()]


def v1_history(make_sim: MakeSim, *, finish: bool) -> Sim:
    sim = make_sim(v1)
    sim.activate()
    sim.complete(1, "old")
    if finish:
        sim.activate()
        sim.complete(2, "after")
        sim.activate()
    return sim


def test_a_new_run_takes_the_new_branch_and_records_a_marker(make_sim: MakeSim) -> None:
    sim = make_sim(v2)
    sim.activate()
    marks = commands_of(sim.history, ev.PatchMarked)
    assert [(m.change_id, m.deprecated) for m in marks] == [("swap", False)]
    assert [c.name for c in commands_of(sim.history, ev.TaskScheduled)] == ["patch.new"]
    # Its own history replays, taking the new branch again.
    instance, live = replay_fresh(v2, sim.history)
    assert instance.patches == {"swap": True} and live.commands == []
    instance.close()


def test_an_old_history_replays_the_old_branch(make_sim: MakeSim) -> None:
    sim = v1_history(make_sim, finish=True)
    instance, live = replay_fresh(v2, sim.history)
    assert instance.patches == {"swap": False}
    assert live.commands == []  # nothing new: no marker written while replaying
    instance.close()


def test_a_run_reaching_the_point_after_the_change_takes_the_new_branch(
    make_sim: MakeSim,
) -> None:
    async def v1_waits() -> list[str]:
        await after_step()
        return [await old_step()]

    async def v2_waits() -> list[str]:
        await after_step()
        return [await new_step() if keepgoing.patched("swap") else await old_step()]

    sim = make_sim(v1_waits)
    sim.activate()  # scheduled 'after' on v1; not yet at the patch point
    sim.complete(1, "after")
    instance, live = replay_fresh(v2_waits, sim.history)
    assert instance.patches == {"swap": True}
    kinds = [type(c).__name__ for c in live.commands]
    assert kinds == ["PatchMarked", "TaskScheduled"]
    assert live.commands[1].name == "patch.new"  # type: ignore[attr-defined]
    instance.close()


def test_without_the_guard_the_old_history_blocks(make_sim: MakeSim) -> None:
    async def renamed() -> list[str]:
        return [await new_step(), await after_step()]

    sim = v1_history(make_sim, finish=False)
    with pytest.raises(NondeterminismError, match=r"patch\.new"):
        replay_fresh(renamed, sim.history)


def test_deprecate_patch_replays_histories_with_and_without_the_marker(
    make_sim: MakeSim,
) -> None:
    marked = make_sim(v2)
    marked.activate()
    marked.complete(1, "new")
    marked.activate()
    instance, live = replay_fresh(v3, marked.history)
    assert live.commands == []
    instance.close()

    fresh = make_sim(v3)
    fresh.activate()
    marks = commands_of(fresh.history, ev.PatchMarked)
    assert [(m.change_id, m.deprecated) for m in marks] == [("swap", True)]
    # v2 workers still replay a v3 history: the marker says "new branch".
    instance, live = replay_fresh(v2, fresh.history)
    assert instance.patches == {"swap": True}
    instance.close()


def test_the_first_answer_holds_for_the_run(make_sim: MakeSim) -> None:
    async def asks_twice() -> list[bool]:
        first = keepgoing.patched("x")
        await after_step()
        return [first, keepgoing.patched("x")]

    sim = make_sim(asks_twice)
    sim.activate()
    sim.complete(1, "after")
    sim.activate()
    assert sim.result() == [True, True]
    assert len(commands_of(sim.history, ev.PatchMarked)) == 1


def test_outside_a_workflow_and_bad_ids() -> None:
    assert keepgoing.patched("anything") is True
    keepgoing.deprecate_patch("anything")
    for bad in ("", "   ", 3, None, "x" * 201):
        with pytest.raises(ValueError, match="change id"):
            keepgoing.patched(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="change id"):
            keepgoing.deprecate_patch(bad)  # type: ignore[arg-type]


def test_the_marker_round_trips_through_the_codec() -> None:
    mark = ev.PatchMarked(change_id="swap", deprecated=True, seq=4, at=1.5)
    assert decode(encode(mark)) == mark


async def two_sites() -> list[str]:
    first = await new_step() if keepgoing.patched("swap") else await old_step()
    second = await new_step() if keepgoing.patched("swap") else await old_step()
    return [first, second]


async def second_site_only() -> list[str]:
    first = await new_step()  # the first site's old branch is gone
    second = await new_step() if keepgoing.patched("swap") else await old_step()
    return [first, second]


def test_removing_the_first_of_two_sites_keeps_the_runs_answer(make_sim: MakeSim) -> None:
    sim = make_sim(two_sites)
    sim.activate()  # asks at the first site: the marker is written with that activation
    sim.complete(1, "new")
    # The run is past the first site; the new code asks only at the second one.
    instance, live = replay_fresh(second_site_only, sim.history)
    assert instance.patches == {"swap": True}
    assert [c.name for c in live.commands] == ["patch.new"]  # type: ignore[attr-defined]
    assert commands_of(live.commands, ev.PatchMarked) == []  # no second marker
    instance.close()


def test_a_patch_asked_live_after_replay_reuses_the_recorded_marker(make_sim: MakeSim) -> None:
    async def asks_late() -> list[str]:
        first = await new_step()
        return [first, await new_step() if keepgoing.patched("swap") else await old_step()]

    sim = make_sim(two_sites)
    sim.activate()
    sim.complete(1, "new")
    sim.activate()
    sim.complete(2, "new")
    instance, live = replay_fresh(asks_late, sim.history)
    assert instance.patches == {"swap": True}
    assert commands_of(live.commands, ev.PatchMarked) == []
    instance.close()


def test_a_run_that_answered_false_keeps_false_at_a_later_site(make_sim: MakeSim) -> None:
    sim = v1_history(make_sim, finish=False)  # passed the old branch, never marked

    async def v2_two_sites() -> list[str]:
        first = await new_step() if keepgoing.patched("swap") else await old_step()
        second = await new_step() if keepgoing.patched("swap") else await after_step()
        return [first, second]

    instance, live = replay_fresh(v2_two_sites, sim.history)
    assert instance.patches == {"swap": False}
    # The second site takes the old branch too: the run answered False once.
    assert [c.name for c in live.commands] == ["patch.after"]  # type: ignore[attr-defined]
    instance.close()
