"""The hook through which direct calls (``await my_workflow(...)``) reach an engine.

Workflow definitions sit below the worker and never import it. The worker's
in-process runner installs itself here when the ``keepgoing`` package is
imported, so awaiting a workflow outside a worker runs it in this process.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from keepgoing._workflow.workflow import WorkflowDefinition

__all__ = ["DirectRunner", "direct_runner", "install_direct_runner"]


class DirectRunner(Protocol):
    """Runs one workflow to its end in this process and returns its result."""

    def __call__(
        self, definition: WorkflowDefinition[..., Any], inputs: dict[str, Any], /
    ) -> Coroutine[Any, Any, Any]: ...


_runner: DirectRunner | None = None


def install_direct_runner(runner: DirectRunner) -> None:
    """Make ``runner`` the engine behind direct workflow calls (replacing any other)."""
    global _runner
    _runner = runner


def direct_runner() -> DirectRunner:
    """The installed runner.

    Raises:
        RuntimeError: none is installed (``keepgoing`` was never imported whole).
    """
    if _runner is None:
        raise RuntimeError(
            "no direct-call runner is installed: import keepgoing before awaiting a workflow"
        )
    return _runner
