"""The store backend's recovery calls: a run's published status, resume, fork, lineage.

The rules (checks, the audit, waiting for a status) are in
``keepgoing/_views/recovery.py``, shared with the server's routes; these
methods run them on the backend's event loop as the user :func:`current_user`
names. :class:`StoreRecoveryCalls` is a mixin of
:class:`~keepgoing._client.store_backend.StoreBackend`.
"""

from __future__ import annotations

import getpass
import os
from typing import Any

from keepgoing._client.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._portal import Portal
from keepgoing._store.protocol import Store
from keepgoing._views import recovery

__all__ = ["StoreRecoveryCalls", "current_user"]


class StoreRecoveryCalls:
    """The recovery half of the store backend (documented on :class:`keepgoing.Client`)."""

    _store: Store
    _portal: Portal

    def get_status(self, workflow_id: str, key: str, wait: float | None) -> tuple[bool, Any]:
        found = self._portal.call(recovery.read_status(self._store, workflow_id, key, wait))
        return found.value(key)

    def resume(self, workflow_id: str, revision: int | None) -> WorkflowRunHandle:
        actor = recovery.Actor("user", current_user(), "client")
        new, _ = self._portal.call(recovery.resume(self._store, workflow_id, revision, actor))
        return WorkflowRunHandle(new.workflow_name, new.workflow_id, new.run_id)

    def fork(
        self,
        source_id: str,
        from_step: int,
        input: Any,
        workflow_id: str | None,
        revision: int | None,
        wait_for_check: bool = False,
    ) -> WorkflowRunHandle:
        actor = recovery.Actor("user", current_user(), "client")
        work = recovery.fork(self._store, source_id, from_step, input, workflow_id, revision, actor)
        new, _ = self._portal.call(work)
        if wait_for_check:
            self._portal.call(recovery.wait_for_check(self._store, new))
        return WorkflowRunHandle(new.workflow_name, new.workflow_id, new.run_id)

    def lineage(self, workflow_id: str) -> dict[str, Any]:
        found = self._portal.call(self._store.lineage(workflow_id))
        origins = self._portal.call(self._store.run_origins(found.run.run_id))
        return {
            "run": WorkflowRun.from_record(found.run),
            "parent": WorkflowRun.from_record(found.parent) if found.parent else None,
            "children": [WorkflowRun.from_record(c) for c in found.children],
            **recovery.origins_view(origins),
        }


def current_user() -> str:
    """Who a store-mode client acts as: ``KEEPGOING_USER``, else the OS login."""
    user = os.environ.get("KEEPGOING_USER")
    if user:
        return user
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}"
