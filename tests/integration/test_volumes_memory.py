"""Agent memory in volumes, with real worker processes: kills, concurrent writers, next runs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

import keepgoing
from keepgoing import Volume
from keepgoing._history import events as ev
from keepgoing._open_store import store_from_url
from keepgoing._store.protocol import Store
from keepgoing._volumes import access

from ._support import Sandbox, Workers, cmd_of, of_type, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def store(kg: Sandbox) -> Iterator[Store]:
    """The test's store, opened in this process for reading volumes."""
    opened = store_from_url(kg.url)
    yield opened
    access.call(opened, opened.close())


@pytest.mark.timeout(60)
def test_a_step_killed_after_writing_leaves_no_version_and_its_retry_makes_one(
    kg: Sandbox, workers: Workers, client: keepgoing.Client, store: Store
) -> None:
    app = kg.app("memory_agent")
    first = workers.start(app)
    handle = client.trigger_workflow("take_notes", {"key": "k", "hold": True})
    wait_until(lambda: kg.effects("wrote", "noted"), 30, "the first attempt to write its notes")
    memory = Volume("memory-k", store=store, create_if_missing=False)

    first.kill()  # SIGKILL after the writes, before the step finishes

    assert memory.versions() == []  # nothing of the killed attempt was stored
    second = workers.start(app)
    kg.release("release-k")
    result = client.result(handle, timeout=30)

    assert result["attempt"] == 2
    history = client.history(handle.workflow_id)
    step = cmd_of(history, "noted")
    (lost,) = of_type(history, ev.TaskAttemptFailed, cmd=step)
    assert (lost.reason, lost.attempt) == ("worker_lost", 1)
    (version,) = memory.versions()
    assert (version.run_id, version.step, version.attempt) == (handle.run_id, step, 2)
    assert version.paths == ("notes.md", "scratchpad.md")
    assert memory.read_text("notes.md") == f"notes from attempt 2 (pid {second.pid})\n"
    assert memory.read_text("scratchpad.md") == "scratch 2\n"
    (committed,) = of_type(history, ev.MemoryCommitted)
    (completed,) = of_type(history, ev.TaskCompleted, cmd=step)
    assert (committed.version, committed.attempt, committed.seq) == (1, 2, completed.seq - 1)


@pytest.mark.timeout(120)
def test_two_processes_each_commit_100_versions_and_no_write_is_lost(
    kg: Sandbox, store: Store
) -> None:
    script = kg.app("volume_writer")
    writers = [
        subprocess.Popen(
            [sys.executable, str(script), kg.url, "shared", name, "100"],
            cwd=kg.root,
            env=kg.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("w1", "w2")
    ]
    try:
        wait_until(lambda: _volume_exists(store, "shared"), 30, "a writer to open the volume")
        kg.release("go")  # both start writing at once
        outputs = [w.communicate(timeout=100) for w in writers]
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert [w.returncode for w in writers] == [0, 0], outputs

    memory = Volume("shared", store=store, create_if_missing=False)
    versions = memory.versions(limit=1000)
    assert [v.id for v in versions] == list(range(1, 201))
    assert [v.parent_id for v in versions] == [None, *range(1, 200)]  # one line, no fork
    written = [path for v in versions for path in v.paths]
    expected = {f"{w}/{i:03d}.txt" for w in ("w1", "w2") for i in range(100)}
    assert sorted(written) == sorted(expected)  # each version added exactly its own file
    files = {f.path: f for f in memory.listdir()}
    assert files.keys() == expected
    for path in sorted(expected)[::37]:
        writer, name = path.split("/")
        assert memory.read_text(path) == f"{writer} wrote {int(name[:3])}\n"
    interleaved = [v.paths[0].split("/")[0] for v in versions]
    print(f"writer order: {''.join(w[1] for w in interleaved)}")


@pytest.mark.timeout(60)
def test_the_next_run_starts_by_reading_the_lessons_the_last_run_wrote(
    kg: Sandbox, workers: Workers, client: keepgoing.Client, store: Store
) -> None:
    workers.start(kg.app("memory_agent"))

    first = client.trigger_workflow("agent_run", {"key": "k", "run_no": 1})
    assert client.result(first, timeout=30) == {"previous": "", "lessons": 1}
    second = client.trigger_workflow("agent_run", {"key": "k", "run_no": 2})
    result = client.result(second, timeout=30)

    lesson_1 = "run 1 found that step 2 needs a smaller batch\n"
    assert result == {"previous": lesson_1, "lessons": 2}
    history = client.history(second.workflow_id)
    first_step = of_type(history, ev.TaskScheduled)[0]
    assert first_step.name == "recall"
    (recalled,) = of_type(history, ev.TaskCompleted, cmd=first_step.cmd)
    assert recalled.result == lesson_1
    memory = Volume("agent-k", store=store, create_if_missing=False)
    assert [(v.run_id, v.paths) for v in memory.versions()] == [
        (first.run_id, ("lessons.md", "reports/run.md")),
        (second.run_id, ("lessons.md", "reports/run.md")),
    ]
    assert memory.read_text("lessons.md") == lesson_1 + lesson_1.replace("run 1", "run 2")
    assert memory.at_version(1).read_text("lessons.md") == lesson_1


def _volume_exists(store: Store, name: str) -> bool:
    return name in access.call(store, store.volume_list())
