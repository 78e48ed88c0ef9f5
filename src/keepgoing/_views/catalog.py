"""Starting a run by a name, or on a queue, that nothing has served yet.

Such a start is accepted: the run is queued and waits for a worker that
serves its name on its queue, so triggering never depends on start-up order.
What is left of the protection against typos is a warning, or, with
``strict=True``, an error:

* a queue that no group, worker or deploy of the store has ever served (a
  typo, or a name copied from another system's docs) gets
  :class:`~keepgoing.UnknownQueueWarning`, naming the closest known queue;
  ``strict=True`` refuses it with :class:`~keepgoing.QueueNotFoundError`.
  ``default`` is always known: every worker serves it unless told otherwise;
* a name no worker has served that is close to one that has gets
  :class:`~keepgoing.UnknownWorkflowWarning` naming the catalog's closest
  known workflows; ``strict=True`` refuses any name no worker has served.

The known queues are the workflow catalog's, the groups' (a deploy registers
its group's queue before any replica runs) and the registered workers'.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from keepgoing._store.protocol import Store
from keepgoing.errors import (
    QueueNotFoundError,
    UnknownQueueWarning,
    UnknownWorkflowWarning,
    WorkflowNotFoundError,
)

__all__ = [
    "DEFAULT_QUEUE",
    "StartWarning",
    "check_start",
    "check_workflow_name",
    "known_queues",
    "warn_unknown",
]

DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class StartWarning:
    """What a start that is accepted all the same warns of: ``code`` is
    ``unknown_workflow`` or ``unknown_queue`` (the warning's class)."""

    text: str
    code: str = UnknownWorkflowWarning.code


async def known_queues(store: Store) -> frozenset[str]:
    """Every queue a group, a worker or a deploy of ``store`` has served (and ``default``)."""
    found = {DEFAULT_QUEUE}
    for queues in (await store.known_workflows()).values():
        found.update(queues)
    found.update(group.task_queue for group in await store.list_groups())
    for worker in await store.list_workers():
        found.update(worker.queues)
    return frozenset(found)


def _closest(queue: str, candidates: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(queue, sorted(candidates), n=1, cutoff=0.0)
    return found[0] if found else None


async def check_start(
    store: Store,
    name: str | None,
    queue: str,
    *,
    strict: bool,
    known: set[str] | None = None,
) -> StartWarning | None:
    """The warning for a start of ``name`` (None: by its definition, whose name needs no
    check) on ``queue``, or None.

    ``known``: queues already known to be served, kept by the caller across starts (a
    queue once served stays known, so a producer reads the catalog once per queue);
    it is filled in here.

    Raises:
        QueueNotFoundError: with ``strict``, nothing of the store has served ``queue``.
        WorkflowNotFoundError: with ``strict``, no worker of the store has served
            ``name`` on ``queue``.
    """
    if known is None or queue not in known:
        queues = await known_queues(store)
        if known is not None:
            known.update(queues)
        if queue not in queues:
            return await _unknown_queue(store, name, queue, queues, strict=strict)
    if name is None:
        return None
    text = await check_workflow_name(store, name, queue, strict=strict)
    return StartWarning(text) if text is not None else None


async def _unknown_queue(
    store: Store, name: str | None, queue: str, queues: frozenset[str], *, strict: bool
) -> StartWarning:
    # The queues the workflow was served on are the likeliest meant; else any known one.
    served_on = (await store.known_workflows()).get(name or "") or ()
    closest = _closest(queue, served_on) or _closest(queue, queues)
    where = ""
    if served_on:
        where = (
            f"; workflow {name!r} has been served on queue(s) {', '.join(sorted(served_on))}, "
            f"not on {queue!r}"
        )
    hint = f" (the closest known queue is {closest!r}{where})" if closest else ""
    text = f"no group, worker or deploy of this store has ever served queue {queue!r}{hint}"
    if strict:
        raise QueueNotFoundError(f"{text}; nothing was started (strict=True)")
    return StartWarning(
        f"{text}; the run waits on queue {queue!r}, which nothing serves",
        UnknownQueueWarning.code,
    )


async def check_workflow_name(store: Store, name: str, queue: str, *, strict: bool) -> str | None:
    """A warning for a start of ``name`` on ``queue`` that no worker has served, or None.

    Raises:
        WorkflowNotFoundError: with ``strict``, no worker of the store has
            served ``name`` on ``queue``.
    """
    known = await store.known_workflows()
    queues = known.get(name)
    if queues is not None and queue in queues:
        return None
    if queues is not None:
        where = ", ".join(sorted(queues))
        text = (
            f"workflow {name!r} has been served on queue(s) {where}, not on {queue!r}; "
            f"the run waits for a worker that serves it on {queue!r}"
        )
    else:
        close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
        if not close and not strict:
            return None  # a name nobody has served yet: start-up order, not a typo
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        text = (
            f"no worker of this store has served a workflow named {name!r} yet{hint}; "
            "the run waits for a worker that serves it"
        )
    if strict:
        raise WorkflowNotFoundError(text.split(";")[0] + "; nothing was started (strict=True)")
    return text


def warn_unknown(warning: StartWarning | None) -> None:
    """Issue the warning's class (:class:`UnknownQueueWarning` or
    :class:`UnknownWorkflowWarning`) at the caller of ``trigger_workflow``."""
    if warning is None:
        return
    kind = (
        UnknownQueueWarning if warning.code == UnknownQueueWarning.code else UnknownWorkflowWarning
    )
    warnings.warn(warning.text, kind, stacklevel=3)  # warn_unknown < Client method < caller
