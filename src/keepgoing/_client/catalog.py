"""Starting a run by a name that no worker has served yet.

Such a start is accepted: the run is queued and waits for a worker that
serves its name, so triggering never depends on start-up order. What is left
of the protection against typos is a warning that names the catalog's
closest known workflows, or, with ``strict=True``, an error.
"""

from __future__ import annotations

import difflib
import warnings

from keepgoing._store.protocol import Store
from keepgoing.errors import UnknownWorkflowWarning, WorkflowNotFoundError

__all__ = ["check_workflow_name", "warn_unknown"]


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


def warn_unknown(text: str | None) -> None:
    """Issue :class:`UnknownWorkflowWarning` at the caller of ``trigger_workflow``."""
    if text is not None:
        warnings.warn(text, UnknownWorkflowWarning, stacklevel=4)
