"""Importing the user's file under its own module name (never as ``__main__``)."""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from types import ModuleType

from keepgoing.errors import ConfigurationError, WorkerImportError

__all__ = ["load_file", "task_queues_from_env"]


def task_queues_from_env() -> dict[str, str]:
    """``KEEPGOING_TASK_QUEUES`` (``task=queue,...``, set by a worker group's backend):
    the tasks whose calls go to the queue of their own group.

    Raises:
        ConfigurationError: an entry is not ``task=queue``.
    """
    routes: dict[str, str] = {}
    for entry in filter(None, os.environ.get("KEEPGOING_TASK_QUEUES", "").split(",")):
        task, sep, queue = entry.partition("=")
        if not sep or not task.strip() or not queue.strip():
            raise ConfigurationError(f"KEEPGOING_TASK_QUEUES: {entry!r} is not task=queue")
        routes[task.strip()] = queue.strip()
    return routes


def load_file(path: str) -> ModuleType:
    """Import ``path`` as module ``<file stem>`` so its tasks and workflows register.

    Code under ``if __name__ == "__main__":`` does not run. The file's folder
    goes first on ``sys.path`` so it can import its neighbours.

    Raises:
        WorkerImportError: the file is missing or raised while importing; the
            message carries the traceback.
    """
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise WorkerImportError(f"no such file: {path}")
    if not full.endswith(".py"):
        raise WorkerImportError(f"{path} is not a Python file (.py)")
    name = os.path.splitext(os.path.basename(full))[0]
    if not name.isidentifier():
        raise WorkerImportError(f"{path}: {name!r} is not a valid module name")
    existing = sys.modules.get(name)
    if existing is not None and os.path.abspath(getattr(existing, "__file__", "") or "") == full:
        return existing
    folder = os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise WorkerImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = "".join(traceback.format_exception(exc)).rstrip()
        raise WorkerImportError(f"importing {path} failed:\n{detail}") from exc
    return module
