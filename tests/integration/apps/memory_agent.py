"""An agent that keeps its memory in a volume: notes, a scratchpad and a lessons file.

``noted`` writes notes.md and scratchpad.md, then (with ``hold``, on its first
attempt) waits for the marker ``release-<key>`` before it finishes, so a test
can SIGKILL its worker after the writes but before the step completes.

``agent_run`` is the "next run reads the lessons" flow: its first step reads
lessons.md, as the previous run left it; its last step appends a lesson.
"""

from __future__ import annotations

import os

from kg_effects import attempt, record, wait_for_marker

import keepgoing
from keepgoing import Volume


@keepgoing.task
def noted(key: str, hold: bool = False) -> dict:
    n = attempt()
    memory = Volume(f"memory-{key}")
    memory.put_file("notes.md", f"notes from attempt {n} (pid {os.getpid()})\n")
    memory.put_file("scratchpad.md", f"scratch {n}\n")
    record("wrote", "noted", key, n)
    if hold and n == 1:
        wait_for_marker(f"release-{key}")
    record("done", "noted", key, n)
    return {"attempt": n, "seen": memory.read_text("notes.md")}


@keepgoing.workflow
async def take_notes(key: str, hold: bool = False) -> dict:
    return await noted(key, hold)


@keepgoing.task
def recall(key: str) -> str:
    memory = Volume(f"agent-{key}")
    return memory.read_text("lessons.md") if memory.exists("lessons.md") else ""


@keepgoing.task
async def work(run_no: int) -> str:
    return f"run {run_no} found that step 2 needs a smaller batch"


@keepgoing.task
def learn(key: str, previous: str, lesson: str) -> int:
    memory = Volume(f"agent-{key}")
    memory.put_file("lessons.md", previous + lesson + "\n")
    memory.put_file("reports/run.md", lesson + "\n")
    return len((previous + lesson).splitlines())


@keepgoing.workflow
async def agent_run(key: str, run_no: int) -> dict:
    previous = await recall(key)  # the first step: what the last run learned
    lesson = await work(run_no)
    count = await learn(key, previous, lesson)
    return {"previous": previous, "lessons": count}
