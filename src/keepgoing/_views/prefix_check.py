"""The replay check of a reused prefix: before a resume (or fork) pinned to a
revision starts, the part of the history it reuses is replayed on that
revision's code, the deploy-time check (``_groups/replaycheck.py``: a
subprocess, so the asking process never imports the code).

A prefix that does not replay there is refused with the check's diff: the new
run would block at its first activation. The check needs the revision's
source, which the store holds for a worker group's revisions; a revision no
group serving the run's queue has is refused by the store itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from keepgoing._groups.replaycheck import replay_histories
from keepgoing._groups.spec import GroupRevision
from keepgoing._history import events as ev
from keepgoing._history.codec import encode
from keepgoing._store.group_records import OpenRun
from keepgoing._store.protocol import Store
from keepgoing._store.records import TERMINAL, RunRecord
from keepgoing._store.sql.prefix import cut_before_step, cut_for_resume
from keepgoing.errors import InvalidRequestError

__all__ = ["CHECK_TIME_LIMIT", "check_fork", "check_prefix", "check_resume"]

CHECK_TIME_LIMIT = 60.0


async def check_prefix(
    store: Store,
    run: RunRecord,
    prefix: Sequence[ev.Event],
    revision: int,
    what: str,
    *,
    strict_args: bool = False,
) -> bool:
    """Replay ``prefix`` (events of ``run``) on ``revision``'s code, or refuse.

    ``strict_args``: each reused step must also be scheduled with the arguments it
    recorded (a fork under a new input). False if the store holds no code for
    ``revision`` on the run's queue (nothing was checked).

    Raises:
        InvalidRequestError: the prefix does not replay there (the diff), or the
            check could not finish within ``CHECK_TIME_LIMIT``.
        GroupError: the revision's code does not import.
    """
    group = next((g for g in await store.list_groups() if g.task_queue == run.task_queue), None)
    found = await store.get_revision(group.name, revision) if group is not None else None
    if found is None:
        return False
    spec = GroupRevision.from_json(found.spec)
    case = OpenRun(
        run.run_id,
        run.workflow_id,
        run.workflow_name,
        revision,
        run.status,
        max((e.seq for e in prefix), default=1) + 1,
        run.created_at,
    )
    report = await replay_histories(
        [(case, [encode(e) for e in prefix])],
        source=spec.source,
        filename=spec.filename,
        time_limit=CHECK_TIME_LIMIT,
        strict_args=strict_args,
    )
    if report.failures:
        error = report.failures[0].error or ""
        raise InvalidRequestError(
            f"{what} refused: the history it reuses does not replay on revision "
            f"{revision}'s code:\n{error}"
        )
    if report.out_of_time:
        raise InvalidRequestError(
            f"{what} refused: the replay check on revision {revision} did not finish "
            f"within {CHECK_TIME_LIMIT:g}s"
        )
    return True


async def check_resume(store: Store, workflow_id: str, revision: int) -> None:
    """The check for ``resume_workflow(workflow_id, revision=...)``: the prefix the
    resume reuses, replayed on ``revision``. A run the resume itself refuses (not
    found, open, completed) is left to it, which says why."""
    run = await store.find_run(workflow_id)
    if run is None or run.status not in ("failed", "cancelled"):
        return
    events = await store.read_history(run.run_id)
    try:
        cut, _ = cut_for_resume(events)
    except InvalidRequestError:
        return
    await check_prefix(store, run, [e for e in events if e.seq < cut], revision, "the resume")


async def check_fork(
    store: Store,
    source: RunRecord,
    step: int,
    input: dict[str, Any] | None,
    revision: int | None,
) -> bool:
    """The check for a fork from ``step``: with a new ``input``, the reused prefix
    (started with that input) must schedule every reused step again with the
    arguments it recorded; pinned to a ``revision``, it must replay on its code.
    The code is the revision's (``revision``, else the source run's). False if
    the store holds no code for it (a queue no worker group serves).

    Raises:
        InvalidRequestError: naming the first reused step that would differ.
    """
    target = revision if revision is not None else source.group_revision
    if target is None or (input is None and revision is None) or source.status not in TERMINAL:
        return False  # an open run: the fork itself refuses it
    events = await store.read_history(source.run_id)
    try:
        cut = cut_before_step(events, step)
    except InvalidRequestError:
        return False  # the fork itself refuses it, naming the steps
    prefix = [
        dataclasses.replace(e, input=input)
        if isinstance(e, ev.WorkflowStarted) and input is not None
        else e
        for e in events
        if e.seq < cut
    ]
    what = "the fork with a new input" if input is not None else "the fork"
    return await check_prefix(store, source, prefix, target, what, strict_args=input is not None)
