"""The runs list's query parameters, read once for the list, the counts and the CLI's calls."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from keepgoing._server.errors import ApiError
from keepgoing._store.inspect_protocol import RUN_STATUSES, RunFilter
from keepgoing._store.trouble import MARKERS

__all__ = ["run_filter"]

Seconds = Annotated[float | None, Query(ge=0, le=1e11, allow_inf_nan=False)]


def run_filter(
    status: Annotated[
        list[str] | None,
        Query(
            max_length=len(RUN_STATUSES) * 2,
            description="One or several statuses, repeated or comma-separated: "
            + ", ".join(RUN_STATUSES),
        ),
    ] = None,
    workflow: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    since: Seconds = None,
    until: Seconds = None,
    created_after: Seconds = None,
    created_before: Seconds = None,
    id: Annotated[
        str | None,
        Query(min_length=1, max_length=300, description="A workflow id or run id, or its start."),
    ] = None,
    q: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description="Text in the workflow id, run id, workflow name, blocked reason or "
            "error (case-insensitive).",
        ),
    ] = None,
    needs_patch: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description="Runs not ended that have not passed keepgoing.patched(this id).",
        ),
    ] = None,
    revision: Annotated[
        int | None, Query(ge=1, le=2**31, description="Runs pinned to this group revision.")
    ] = None,
    trouble: Annotated[
        list[str] | None,
        Query(
            max_length=len(MARKERS) * 2,
            description="Runs carrying every one of these trouble markers, repeated or "
            "comma-separated: " + ", ".join(MARKERS),
        ),
    ] = None,
) -> RunFilter:
    """The :class:`RunFilter` the query asks for.

    Raises:
        ApiError: an unknown status or marker, or a time range that ends before it
            starts (400).
    """
    statuses = _listed(status, RUN_STATUSES, "status", "a run's status")
    markers = _listed(trouble, MARKERS, "trouble", "a trouble marker")
    # The old names say the same as the new ones: both given, the narrower range holds.
    lows = [v for v in (since, created_after) if v is not None]
    highs = [v for v in (until, created_before) if v is not None]
    low = max(lows) if lows else None
    high = min(highs) if highs else None
    if low is not None and high is not None and low > high:
        raise ApiError(
            400,
            "invalid_request",
            f"since ({low:g}) is after until ({high:g}); the range would hold nothing",
        )
    return RunFilter(
        statuses=tuple(dict.fromkeys(statuses)),
        workflow_name=workflow,
        since=low,
        until=high,
        id=id,
        text=q,
        needs_patch=needs_patch,
        revision=revision,
        trouble=tuple(dict.fromkeys(markers)),
    )


def _listed(values: list[str] | None, known: tuple[str, ...], name: str, what: str) -> list[str]:
    """The values of a repeated or comma-separated parameter, each one of ``known``."""
    found: list[str] = []
    for value in values or ():
        found += [part.strip() for part in value.split(",") if part.strip()]
    bad = [v for v in found if v not in known]
    if bad:
        raise ApiError(
            400,
            "invalid_request",
            f"unknown {name} {bad[0]!r}; {what} is one of {', '.join(known)}",
            {"errors": [{"loc": ["query", name], "msg": f"unknown {name}"}]},
        )
    return found
