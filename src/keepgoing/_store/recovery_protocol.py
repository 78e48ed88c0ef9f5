"""The store's recovery facet: the progress a run publishes, resuming and forking runs.

* :meth:`RecoveryStore.run_status` — the newest value of each name a run
  published with ``keepgoing.set_status`` (table ``run_status``, written in
  the commit that records the ``StatusSet`` event).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

__all__ = ["RecoveryStore", "StatusValue"]


@dataclass(frozen=True)
class StatusValue:
    """One published value: its name, the value, and when the run published it."""

    name: str
    value: Any
    at: float


class RecoveryStore(abc.ABC):
    """Published progress, resume and fork (both SQL stores: ``_store/sql/recovery.py``)."""

    @abc.abstractmethod
    async def run_status(self, run_id: str, name: str | None = None) -> list[StatusValue]:
        """The newest value of each name run ``run_id`` published (only ``name``'s, if
        given), oldest first; empty when it published none."""
