"""Agent memory in a versioned volume: each run starts from the lessons the last one wrote.

python examples/agent_memory.py        # run it twice: the second run reads the first's lessons
keepgoing volume versions agent-memory --store sqlite:///.keepgoing/examples.db
"""

from __future__ import annotations

from keepgoing import Client, Volume, task, workflow

STORE = "sqlite:///.keepgoing/examples.db"


@task
def recall() -> str:
    memory = Volume("agent-memory")  # inside a task: the worker's store
    return memory.read_text("lessons.md") if memory.exists("lessons.md") else ""


@task(retries=2)
def research(topic: str, lessons: str) -> str:
    memory = Volume("agent-memory")
    memory.put_file("scratchpad.md", f"looking into {topic}; known lessons:\n{lessons}")
    # ... model and tool calls would go here ...
    notes = f"{topic}: the export API pages at 500 rows; ask for 200 at a time\n"
    memory.put_file("notes.md", notes)  # staged: commits only if this attempt succeeds
    return notes


@task
def reflect(lessons: str, notes: str) -> int:
    memory = Volume("agent-memory")
    lesson = notes.split(": ", 1)[1]
    if lesson not in lessons:
        lessons += lesson
    memory.put_file("lessons.md", lessons)
    memory.put_file("report.md", f"# Report\n\n{notes}")
    return len(lessons.splitlines())


@workflow
async def agent(topic: str) -> dict[str, object]:
    lessons = await recall()  # the first step: what earlier runs learned
    notes = await research(topic, lessons)
    count = await reflect(lessons, notes)
    return {"started_with_lessons": bool(lessons), "lessons": count}


if __name__ == "__main__":
    with Client(store=STORE) as client:
        print(client.run_workflow(agent, {"topic": "invoices"}))
    memory = Volume("agent-memory", store=STORE)
    for version in memory.versions()[-3:]:
        print(f"version {version.id}: {version.message} -> {', '.join(version.paths)}")
    print(memory.read_text("lessons.md"), end="")
