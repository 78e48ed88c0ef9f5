"""The replay check: do the histories of the runs a deploy would move replay on its code?

Before a deploy moves runs to its new revision (``upgrade="auto"``, or runs named
with ``migrate``), their histories are replayed against the new source in a
subprocess (``python -m keepgoing._worker.replayer``), so the deploying process
never imports that code, and code that hangs or crashes cannot take it down.

The check is bounded, and says so: at most ``per_name`` runs per workflow name,
newest first, within ``time_limit`` seconds. A run that was not checked (past
the sample, or out of time) is reported as such and is not moved.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from keepgoing._history.codec import encode
from keepgoing._store.group_records import OpenRun
from keepgoing._store.protocol import Store
from keepgoing.errors import GroupError

__all__ = ["DEFAULT_PER_NAME", "DEFAULT_TIME_LIMIT", "ReplayReport", "RunCheck", "check_runs"]

DEFAULT_PER_NAME = 20
DEFAULT_TIME_LIMIT = 60.0


@dataclass(frozen=True)
class RunCheck:
    """One run's history replayed on the new code (``error``: the diff, when it does not)."""

    run_id: str
    workflow_id: str
    workflow_name: str
    revision: int | None
    next_seq: int
    ok: bool
    error: str | None = None


@dataclass(frozen=True)
class ReplayReport:
    """What a replay check did, and its bound.

    ``checked`` are the runs replayed; ``not_sampled`` counts, per workflow name,
    the runs past the ``per_name`` newest; ``out_of_time`` are the runs of the
    sample the ``time_limit`` left unchecked.
    """

    checked: tuple[RunCheck, ...] = ()
    not_sampled: dict[str, int] = field(default_factory=dict)
    out_of_time: tuple[str, ...] = ()
    per_name: int = DEFAULT_PER_NAME
    time_limit: float = DEFAULT_TIME_LIMIT
    seconds: float = 0.0

    @property
    def failures(self) -> tuple[RunCheck, ...]:
        return tuple(c for c in self.checked if not c.ok)

    @property
    def passed(self) -> tuple[RunCheck, ...]:
        return tuple(c for c in self.checked if c.ok)

    def bound(self) -> str:
        """The bound, in words: what was and was not checked."""
        skipped = sum(self.not_sampled.values())
        parts = [
            f"checked {len(self.checked)} run(s) in {self.seconds:.1f}s "
            f"(at most {self.per_name} per workflow, newest first; limit {self.time_limit:g}s)"
        ]
        if skipped:
            names = ", ".join(f"{n} of {w}" for w, n in sorted(self.not_sampled.items()))
            parts.append(f"not sampled: {names}; they stay on their revisions")
        if self.out_of_time:
            parts.append(
                f"{len(self.out_of_time)} run(s) out of time; they stay on their revisions"
            )
        return "; ".join(parts)

    def summary(self) -> str:
        """The bound, then each run that would block with its diff."""
        lines = [self.bound()]
        for c in self.failures:
            lines.append(
                f"run {c.run_id} (workflow {c.workflow_name!r}, id {c.workflow_id!r}, "
                f"revision {c.revision}) would block on the new code:"
            )
            lines.extend(f"    {line}" for line in (c.error or "").splitlines())
        return "\n".join(lines)

    def to_body(self) -> dict[str, Any]:
        return {
            "checked": [asdict(c) for c in self.checked],
            "not_sampled": dict(self.not_sampled),
            "out_of_time": list(self.out_of_time),
            "per_name": self.per_name,
            "time_limit": self.time_limit,
            "seconds": self.seconds,
        }

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ReplayReport:
        return cls(
            checked=tuple(RunCheck(**c) for c in body.get("checked", [])),
            not_sampled={str(k): int(v) for k, v in body.get("not_sampled", {}).items()},
            out_of_time=tuple(str(r) for r in body.get("out_of_time", [])),
            per_name=int(body.get("per_name", DEFAULT_PER_NAME)),
            time_limit=float(body.get("time_limit", DEFAULT_TIME_LIMIT)),
            seconds=float(body.get("seconds", 0.0)),
        )


def check_bounds(per_name: object, time_limit: object) -> tuple[int, float]:
    """The check's bounds if they are sane.

    Raises:
        GroupError: naming the bad bound.
    """
    if isinstance(per_name, bool) or not isinstance(per_name, int) or not 1 <= per_name <= 10000:
        raise GroupError(f"the check's runs per workflow must be 1 to 10000, not {per_name!r}")
    if (
        isinstance(time_limit, bool)
        or not isinstance(time_limit, int | float)
        or not 0 < time_limit <= 3600
    ):
        raise GroupError(f"the check's time limit must be 0 to 3600 seconds, not {time_limit!r}")
    return per_name, float(time_limit)


def sample(runs: Iterable[OpenRun], per_name: int) -> tuple[list[OpenRun], dict[str, int]]:
    """The newest ``per_name`` runs of each workflow name, and how many were left out."""
    taken: dict[str, int] = {}
    left: dict[str, int] = {}
    chosen = []
    for run in sorted(runs, key=lambda r: (-r.created_at, r.run_id)):
        if taken.get(run.workflow_name, 0) < per_name:
            taken[run.workflow_name] = taken.get(run.workflow_name, 0) + 1
            chosen.append(run)
        else:
            left[run.workflow_name] = left.get(run.workflow_name, 0) + 1
    return chosen, left


async def check_runs(
    store: Store,
    runs: Sequence[OpenRun],
    *,
    source: str,
    filename: str,
    python: str | None = None,
    per_name: int = DEFAULT_PER_NAME,
    time_limit: float = DEFAULT_TIME_LIMIT,
    import_path: Sequence[str] = (),
) -> ReplayReport:
    """Replay the histories of a sample of ``runs`` on ``source``, in a subprocess.

    ``import_path``: folders put first on the subprocess's ``PYTHONPATH`` (the
    deployed file's own folder, so it imports its neighbours as it does here).

    Raises:
        GroupError: the new source does not import (the message says why).
    """
    per_name, time_limit = check_bounds(per_name, time_limit)
    chosen, left = sample(runs, per_name)
    histories = [(run, await store.read_history(run.run_id)) for run in chosen]
    return await replay_histories(
        [(run, [encode(e) for e in events]) for run, events in histories],
        source=source,
        filename=filename,
        python=python,
        per_name=per_name,
        time_limit=time_limit,
        not_sampled=left,
        import_path=import_path,
    )


async def replay_histories(
    cases: Sequence[tuple[OpenRun, list[dict[str, Any]]]],
    *,
    source: str,
    filename: str,
    python: str | None = None,
    per_name: int = DEFAULT_PER_NAME,
    time_limit: float = DEFAULT_TIME_LIMIT,
    not_sampled: dict[str, int] | None = None,
    import_path: Sequence[str] = (),
    strict_args: bool = False,
) -> ReplayReport:
    """Replay encoded histories (``cases``) on ``source`` in a subprocess, within the limit.

    ``strict_args``: each step must also be scheduled with its recorded arguments.
    """
    started = time.monotonic()
    results: dict[str, RunCheck] = {}
    with tempfile.TemporaryDirectory(prefix="keepgoing-check-") as folder:
        path = Path(folder) / Path(filename).name
        path.write_text(source, encoding="utf-8")
        errors = Path(folder) / "stderr.txt"
        # A file, not a pipe: code that prints a lot to stderr cannot stall the check.
        with errors.open("wb") as err:
            proc = await _spawn(python, path, err.fileno(), folder, import_path)
        try:
            await asyncio.wait_for(
                _converse(proc, cases, results, errors, strict_args), timeout=max(0.1, time_limit)
            )
        except TimeoutError:
            pass
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            await proc.wait()
    by_id = {run.run_id: run for run, _ in cases}
    checked = tuple(results[r] for r in by_id if r in results)
    return ReplayReport(
        checked=checked,
        not_sampled=dict(not_sampled or {}),
        out_of_time=tuple(r for r in by_id if r not in results),
        per_name=per_name,
        time_limit=time_limit,
        seconds=time.monotonic() - started,
    )


async def _spawn(
    python: str | None, path: Path, stderr: int, folder: str, import_path: Sequence[str]
) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    paths = [*import_path, *filter(None, [env.get("PYTHONPATH")])]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return await asyncio.create_subprocess_exec(
        python or sys.executable,
        "-m",
        "keepgoing._worker.replayer",
        str(path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=env,
        cwd=folder,
        limit=64 * 1024 * 1024,
    )


async def _converse(
    proc: asyncio.subprocess.Process,
    cases: Sequence[tuple[OpenRun, list[dict[str, Any]]]],
    results: dict[str, RunCheck],
    errors: Path,
    strict_args: bool = False,
) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    first = await proc.stdout.readline()
    hello = json.loads(first) if first.strip() else {}
    if "ready" not in hello:
        await proc.wait()
        why = str(hello.get("import_error") or await asyncio.to_thread(_tail, errors))
        raise GroupError(f"the new code cannot be checked: it does not import: {why.strip()}")
    runs = {run.run_id: run for run, _ in cases}

    async def feed() -> None:
        assert proc.stdin is not None
        for run, events in cases:
            line = {"run_id": run.run_id, "events": events, "strict_args": strict_args}
            proc.stdin.write((json.dumps(line) + "\n").encode())
            await proc.stdin.drain()
        proc.stdin.close()

    feeding = asyncio.ensure_future(feed())
    try:
        while len(results) < len(cases):
            line = await proc.stdout.readline()
            if not line:
                break  # it died (a crash in the new code): the rest stay unchecked
            answer = json.loads(line)
            run = runs[answer["run_id"]]
            results[run.run_id] = RunCheck(
                run_id=run.run_id,
                workflow_id=run.workflow_id,
                workflow_name=run.workflow_name,
                revision=run.group_revision,
                next_seq=run.next_seq,
                ok=bool(answer["ok"]),
                error=answer.get("error"),
            )
    finally:
        feeding.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, BrokenPipeError):
            await feeding


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:]
