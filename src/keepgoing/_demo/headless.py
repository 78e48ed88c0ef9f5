"""``keepgoing demo --headless``: the demo's scenarios without a browser, for CI.

It deploys the agent, starts a digest, kills the worker in the middle of a step
through the kill API (as the page's button does), waits for the run to finish on
a fresh worker, and prints the evidence; then a second run that starts from the
first one's lessons; then each use case's own scenario and evidence. The result
is whether every piece of evidence held.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from keepgoing._demo.digest import (
    KILL_STEP,
    deploy_agent,
    evidence,
    kill_mid_run,
    model_label,
    start_run,
)
from keepgoing._demo.usecases import USE_CASES, DemoStack, Evidence, UseCase
from keepgoing._history import events as ev

__all__ = ["run_headless"]

Say = Callable[[str], None]


def run_headless(
    stack: DemoStack,
    say: Say,
    *,
    use_cases: tuple[UseCase, ...] = USE_CASES,
    digest: bool = True,
) -> bool:
    """Run every scenario on ``stack`` (the agent's first, unless ``digest`` is off);
    True when all the evidence held."""
    results = [_digest(stack, say)] if digest else []
    for use_case in use_cases:
        say(f"\n== {use_case.key} · {use_case.title} ({use_case.area})")
        printed: list[str] = []
        try:
            found = use_case.headless(stack, _recording(say, printed))
        except Exception as exc:
            found = Evidence(use_case.key, (f"FAIL the scenario raised {exc!r}",), False)
        _show(say, found, already=printed)
        results.append(found)
    failed = [e.use_case for e in results if not e.ok]
    say("")
    say("Kill the worker. The agent keeps going." if not failed else f"FAILED: {failed}")
    return not failed


def _digest(stack: DemoStack, say: Say) -> Evidence:
    say("== support digest: kill the worker mid-step")
    say(f"model: {model_label()}")
    worker = deploy_agent(stack)
    say(f"deployed {worker.scaling_group} (queue {worker.task_queue}) on the local backend")
    started = time.monotonic()
    first = start_run(stack, worker, "week-42")
    say(f"triggered {first}; after its first batch, waiting for {KILL_STEP} to run")
    killed = kill_mid_run(stack, first)
    say(f"SIGKILL worker {killed} in the middle of {KILL_STEP} (through the kill API)")
    result = stack.client.result(first, timeout=300 if stack.fast else 1800)
    say(f"the run finished in {time.monotonic() - started:.1f} s: {result['tickets']} tickets")
    found = evidence(stack, first, killed)
    second = start_run(stack, worker, "week-43", tickets=4)
    stack.client.result(second, timeout=300)
    lesson = result["lessons_learned"][0] if result.get("lessons_learned") else ""
    recalled = next(
        (e.result for e in stack.client.history(second) if isinstance(e, ev.TaskCompleted)), ""
    )  # the first step's output: the lessons.md it read
    read = bool(lesson) and lesson in str(recalled)
    line = f"the next run ({second}) started by reading lessons.md: {lesson!r}"
    found = Evidence(
        found.use_case,
        (*found.lines, ("ok   " if read else "FAIL ") + line),
        found.ok and read,
    )
    _show(say, found)
    return found


def _recording(say: Say, printed: list[str]) -> Say:
    """``say``, keeping what it printed in ``printed``."""

    def recording(text: str) -> None:
        printed.append(text.strip())
        say(text)

    return recording


def _show(say: Say, found: Evidence, already: Sequence[str] = ()) -> None:
    """Print the evidence, less the lines the scenario already printed as it went."""
    for line in found.lines:
        if not any(text.endswith(line.strip()) for text in already):
            say(f"  {line}")
    say(f"  -> {found.use_case}: {'evidence holds' if found.ok else 'EVIDENCE DOES NOT HOLD'}")
