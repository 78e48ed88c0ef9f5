"""Cached (sticky) workflow instances, least recently used evicted first."""

from __future__ import annotations

from collections import OrderedDict

from keepgoing._runtime.instance import WorkflowInstance

__all__ = ["InstanceCache"]


class InstanceCache:
    """Instances by run id. A run being activated is *busy* and not handed out twice."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, WorkflowInstance] = OrderedDict()
        self._busy: set[str] = set()
        self.evictions = 0

    def take(self, run_id: str) -> WorkflowInstance | None:
        """Mark ``run_id`` busy and return its instance (None if not cached).

        Raises:
            KeyError: the run is already busy.
        """
        if run_id in self._busy:
            raise KeyError(run_id)
        self._busy.add(run_id)
        return self._items.pop(run_id, None)

    def is_busy(self, run_id: str) -> bool:
        return run_id in self._busy

    def give_back(self, run_id: str, instance: WorkflowInstance | None) -> None:
        """End the busy period; keep ``instance`` unless it is None or finished."""
        self._busy.discard(run_id)
        if instance is None or instance.done:
            if instance is not None:
                instance.close()
            return
        self._items[run_id] = instance
        while len(self._items) > self.size:
            _, old = self._items.popitem(last=False)
            old.close()
            self.evictions += 1

    def clear(self) -> None:
        for instance in self._items.values():
            instance.close()
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
