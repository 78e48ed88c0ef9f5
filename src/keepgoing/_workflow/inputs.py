"""The input document of a start: a workflow definition's signature, or a bare name's JSON."""

from __future__ import annotations

from typing import Any

from keepgoing._payload import check_json
from keepgoing._run_flow import RunFlow
from keepgoing._workflow.registry import registry
from keepgoing._workflow.workflow import WorkflowDefinition
from keepgoing.errors import PayloadError

__all__ = ["start_flow", "start_input"]


def start_input(
    workflow_or_name: WorkflowDefinition[..., Any] | str, value: Any
) -> tuple[str, dict[str, Any], str]:
    """The name, stored input document and code version of a start by definition or name.

    A name this process has a definition for is bound to its signature; any
    other name takes a JSON mapping (keyword inputs) or list (positional).

    Raises:
        TypeError: neither a ``@workflow`` nor a non-empty name.
        PayloadError: the input is not JSON, or not a mapping or list.
    """
    if isinstance(workflow_or_name, WorkflowDefinition):
        return (
            workflow_or_name.name,
            workflow_or_name.bind_input(value),
            workflow_or_name.code_version,
        )
    if not isinstance(workflow_or_name, str) or not workflow_or_name:
        raise TypeError(
            f"trigger_workflow needs a @workflow or its name, not {type(workflow_or_name).__name__}"
        )
    known = registry.workflows.get(workflow_or_name)
    if known is not None:
        return known.name, known.bind_input(value), known.code_version
    if value is None:
        return workflow_or_name, {"args": [], "kwargs": {}}, ""
    check_json(value, f"input of workflow {workflow_or_name!r}")
    if isinstance(value, dict):
        return workflow_or_name, {"args": [], "kwargs": value}, ""
    if isinstance(value, list):
        return workflow_or_name, {"args": value, "kwargs": {}}, ""
    raise PayloadError(
        f"input of workflow {workflow_or_name!r} must be a mapping of parameter names "
        f"(or a list), not {type(value).__name__}"
    )


def start_flow(
    workflow_or_name: WorkflowDefinition[..., Any] | str, document: dict[str, Any]
) -> tuple[RunFlow | None, str | None]:
    """The run-flow spec of a start this process has the definition for, and its
    key when only the code can compute it (a callable key); (None, None) without.

    The store applies the spec its workers recorded over this one: this one
    stands only for a workflow no worker has recorded yet.
    """
    if isinstance(workflow_or_name, WorkflowDefinition):
        known: WorkflowDefinition[..., Any] | None = workflow_or_name
    else:
        known = registry.workflows.get(workflow_or_name)
    if known is None or known.flow is None:
        return None, None
    return known.flow, known.flow_key(document)
