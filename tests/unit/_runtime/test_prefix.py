"""A resumed or forked run's reused prefix, held to what the code schedules now."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from keepgoing import NondeterminismError, task
from keepgoing._history import events as ev
from keepgoing._runtime.prefix import PrefixMismatch

from .._sim import Sim, keys, replay_fresh

MakeSim = Callable[..., Sim]


@task(name="prefix.lookup_customer")
def lookup_customer(customer_id: str, region: str = "eu") -> str:
    return customer_id


@task(name="prefix.reply")
def reply(customer_id: str, note: str) -> str:
    return note


async def support(customer_id: str, note: str, region: str = "eu") -> str:
    await lookup_customer(customer_id, region=region)
    await lookup_customer(customer_id.upper())
    return await reply(customer_id, note)


def _copied(sim: Sim, upto_step: int, by: str, **kwargs: object) -> list[ev.Event]:
    """The run's history up to the marker that scheduled ``upto_step``, as the store's
    copy starts a fork or a resume with it (``reused_upto``, ``reused_by``, new input)."""
    marker = max(
        e.seq
        for e in sim.history
        if isinstance(e, ev.ActivationCompleted)
        and e.seq < next(s.seq for s in sim.history if getattr(s, "cmd", 0) == upto_step)
    )
    started = sim.history[0]
    assert isinstance(started, ev.WorkflowStarted)
    new_input = {"args": [], "kwargs": kwargs} if kwargs else started.input
    first = dataclasses.replace(started, input=new_input, reused_upto=marker - 1, reused_by=by)
    return [first, *sim.history[1 : marker - 1]]


def _finished(make_sim: MakeSim) -> Sim:
    sim = make_sim(support, customer_id="c1", note="hi")
    for cmd in (1, 2, 3):
        sim.activate()
        sim.complete(cmd, "ok")
    sim.activate()
    return sim


def test_a_fork_whose_new_input_changes_a_reused_argument_is_refused(
    make_sim: MakeSim,
) -> None:
    sim = _finished(make_sim)
    prefix = _copied(sim, 3, "fork_input", customer_id="c9", note="hi")
    with pytest.raises(PrefixMismatch) as refused:
        replay_fresh(support, prefix)
    assert str(refused.value) == (
        "fork refused: step 1 prefix.lookup_customer was recorded with customer_id='c1', "
        "the new input schedules customer_id='c9'; fork from step 1 or earlier"
    )
    assert refused.value.step == 1
    assert isinstance(refused.value, NondeterminismError)


def test_a_keyword_argument_and_a_missing_one_are_named(make_sim: MakeSim) -> None:
    sim = _finished(make_sim)
    prefix = _copied(sim, 3, "fork_input", customer_id="c1", note="hi", region="us")
    with pytest.raises(PrefixMismatch, match="region='eu', the new input schedules region='us'"):
        replay_fresh(support, prefix)


def test_a_fork_whose_new_input_changes_only_later_steps_goes_on(make_sim: MakeSim) -> None:
    sim = _finished(make_sim)
    prefix = _copied(sim, 3, "fork_input", customer_id="c1", note="bye")
    instance, activation = replay_fresh(support, prefix)
    try:
        assert keys(activation.commands) == [("TaskScheduled", 3, "prefix.reply")]
        (scheduled,) = activation.commands
        assert isinstance(scheduled, ev.TaskScheduled) and scheduled.args == ["c1", "bye"]
    finally:
        instance.close()


def test_only_the_reused_prefix_is_held_to_its_arguments(make_sim: MakeSim) -> None:
    # Without reused_upto (a run's own history) replay matches names and numbers only.
    sim = _finished(make_sim)
    history = [dataclasses.replace(sim.history[0], input={"args": ["c9", "hi"], "kwargs": {}})]
    instance, _ = replay_fresh(support, [*history, *sim.history[1:]])
    instance.close()


def test_a_resume_onto_code_that_schedules_otherwise_is_refused(make_sim: MakeSim) -> None:
    sim = _finished(make_sim)
    prefix = _copied(sim, 3, "resume")

    async def changed(customer_id: str, note: str, region: str = "eu") -> str:
        await lookup_customer(customer_id, region=region)
        await lookup_customer(customer_id.lower())  # was .upper()
        return await reply(customer_id, note)

    with pytest.raises(PrefixMismatch) as refused:
        replay_fresh(changed, prefix)
    assert str(refused.value).startswith(
        "resume refused: step 2 prefix.lookup_customer was recorded with customer_id='C1', "
        "the code now schedules customer_id='c1'"
    )

    async def other_steps(customer_id: str, note: str, region: str = "eu") -> str:
        return await reply(customer_id, note)

    with pytest.raises(PrefixMismatch) as different:
        replay_fresh(other_steps, prefix)
    message = str(different.value)
    assert message.startswith("resume refused: the code now schedules other steps")
    assert "fork from step 1 or earlier" in message and "blocked" not in message


def test_once_an_activation_past_the_prefix_committed_replay_matches_as_for_any_run(
    make_sim: MakeSim,
) -> None:
    sim = _finished(make_sim)
    prefix = _copied(sim, 3, "fork_input", customer_id="c1", note="bye")
    past = ev.ActivationCompleted(seq=len(prefix) + 1, at=prefix[-1].at, saw_upto=1, time=0.0)
    changed = [dataclasses.replace(prefix[0], input={"args": ["c9", "bye"], "kwargs": {}})]
    instance, _ = replay_fresh(support, [*changed, *prefix[1:], past])  # no refusal
    instance.close()
