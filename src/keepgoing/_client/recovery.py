"""The recovery half of :class:`keepgoing.Client`: the progress a run publishes,
resuming a failed or cancelled run, and forking an ended run from a step.

The rules (checks, the audit, waiting for a status) are in
``keepgoing/_views/recovery.py``, shared with the server's routes; these methods
only hand a call to the client's backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from keepgoing._client.runs import WorkflowRunHandle
from keepgoing._views.recovery import check_wait

if TYPE_CHECKING:
    from keepgoing._client.backend import Backend

__all__ = ["RecoveryMethods"]


class RecoveryMethods:
    """The recovery half of :class:`keepgoing.Client` (documented there as a whole)."""

    _backend: Backend

    def get_status(self, workflow_id: str, key: str, wait: float | None = None) -> Any:
        """The newest value the run published under ``key`` (``keepgoing.set_status``).

        Returns None when the run has published nothing under ``key``. With
        ``wait`` (seconds), waits for the value to appear, woken by the store's
        change signal (no polling), and returns it as soon as it does.

        Raises:
            RunNotFoundError: no run has this workflow id.
            TimeoutError: ``wait`` passed, or the run ended, before the value appeared.
            ValueError: ``key`` is not a non-empty string of at most 200 characters.
        """
        found, value = self._backend.get_status(workflow_id, key, check_wait(wait))
        if not found and wait is not None:
            raise TimeoutError(f"run {workflow_id!r} has published no status {key!r}")
        return value

    def resume_workflow(
        self, workflow_id: str, *, revision: int | None = None
    ) -> WorkflowRunHandle:
        """Go on with a failed or cancelled run from where it stopped, as a new run.

        The new run has the same workflow id and input; every step that finished
        before the failure is reused from the history (the store copies it), and
        the step that failed runs again on the code that serves the queue now. A
        run cancelled in a step or a timer goes back into it. ``revision`` pins the
        new run to a group revision. Written to the audit log.

        Raises:
            RunNotFoundError: no run has this workflow id.
            WorkflowAlreadyRunningError: its newest run has not ended.
            InvalidRequestError: the run completed, or its history holds what a copy
                cannot reuse (an open wait for an external event, a child run).
        """
        return self._backend.resume(workflow_id, revision)

    def fork_workflow(
        self,
        source_workflow_id: str,
        /,
        from_step: int,
        *,
        input: Any = None,
        workflow_id: str | None = None,
        revision: int | None = None,
        wait_for_check: bool = False,
    ) -> WorkflowRunHandle:
        """A new run that reuses an ended run's results before step ``from_step``.

        ``from_step`` is the step's number as the timeline shows it (``#``). The
        steps scheduled before it are not run again: their recorded results are
        copied by the store in one transaction. Step ``from_step`` and all after
        it run anew, with ``input`` if given (else the original's). The fork is
        named ``workflow_id`` (default ``<source>-fork-<8 hex>``) and records its
        origin (``Client.lineage``). Written to the audit log.

        Every reused step must be scheduled again, by the code and the input the
        fork runs with, with the name and arguments it recorded: the fork's first
        activation checks it on the worker and, at a step that differs, fails
        the fork at once (a ``ReuseRefusedError`` naming the step and argument),
        before any later step runs. With ``wait_for_check``, returns only once
        the fork has passed that check, and raises the refusal if it did not.

        Raises:
            RunNotFoundError: no run has this workflow id.
            WorkflowAlreadyRunningError: the run has not ended (only ended runs are
                forked), or ``workflow_id`` names an open run.
            InvalidRequestError: no such step, or a prefix a copy cannot reuse.
            ReuseRefusedError: with ``wait_for_check``, a reused step would be
                scheduled otherwise (the fork was started and failed with it).
            WorkflowBlockedError: with ``wait_for_check``, the code failed while
                replaying the reused steps.
            PayloadError: ``input`` is not JSON.
        """
        return self._backend.fork(
            source_workflow_id, from_step, input, workflow_id, revision, wait_for_check
        )
