"""The group services a process runs: the autoscaler with the local backend, on a store."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from keepgoing._clock import Clock, system_clock
from keepgoing._groups.autoscaler import Autoscaler, ReplicaKeys
from keepgoing._groups.local import LocalBackend
from keepgoing._store.protocol import Store
from keepgoing._store.url import project_folder

__all__ = ["WORKER_STORE_ENV", "group_autoscaler", "worker_store_url"]

log = logging.getLogger("keepgoing.groups")

#: The store URL replicas get instead of this process's: on PostgreSQL, a worker
#: role's (``keepgoing store worker-role``), which cannot touch tokens, secrets or audit.
WORKER_STORE_ENV = "KEEPGOING_WORKER_STORE"


def worker_store_url(store: Store) -> str | None:
    """The URL other processes open ``store`` with (None: a store in memory):
    :data:`WORKER_STORE_ENV` when it is set, else the store's own URL."""
    own = _own_url(store)
    return (os.environ.get(WORKER_STORE_ENV) or own) if own is not None else None


def _own_url(store: Store) -> str | None:
    path = getattr(store, "path", None)
    if path is not None:
        return None if path == ":memory:" else f"sqlite:///{os.path.abspath(path)}"
    url = getattr(store, "url", None)
    return url if isinstance(url, str) and url.startswith("postgres") else None


def group_autoscaler(
    store: Store,
    *,
    workdir: Path | None = None,
    clock: Clock = system_clock,
    keys: ReplicaKeys | None = None,
) -> Autoscaler | None:
    """An autoscaler for ``store``'s local groups (None for a store in memory, which no
    worker process can share); ``keys`` gives replicas a server's gateway."""
    url = worker_store_url(store)
    if url is None:
        return None
    default = project_folder() / "groups"  # the project's, as its store is
    folder = workdir or Path(os.environ.get("KEEPGOING_GROUPS_DIR") or default)
    # Replicas write to this process's output, or to <group>.log files in this folder.
    logs = os.environ.get("KEEPGOING_GROUPS_LOG_DIR")
    backend = LocalBackend(
        url,
        workdir=folder.absolute(),
        progress=log.info,
        log_dir=Path(logs).absolute() if logs else None,
    )
    return Autoscaler(store, {"local": backend}, clock=clock, keys=keys)
