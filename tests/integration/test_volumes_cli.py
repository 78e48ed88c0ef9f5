"""``keepgoing volume ...`` on a real store: list, read at a version, diff, roll back, fork."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from keepgoing import Volume
from keepgoing._open_store import store_from_url
from keepgoing._store.protocol import Store
from keepgoing._volumes import access

from ._support import Sandbox

pytestmark = pytest.mark.integration


@pytest.fixture
def memory(kg: Sandbox) -> Iterator[Volume]:
    """Volume ``agent`` with three versions of lessons.md and a report."""
    store: Store = store_from_url(kg.url)
    volume = Volume("agent", store=store)
    volume.put_file("lessons.md", "one\n")
    volume.put_file("lessons.md", "one\ntwo\n")
    volume.put_file("reports/r1.md", "report\n")
    yield volume
    access.call(store, store.close())


def volume_cli(kg: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", "volume", *args, "--store", kg.url],
        cwd=kg.root,
        env={**kg.env(), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    print(
        f"$ keepgoing volume {' '.join(args)}\n[exit {done.returncode}]\n{done.stdout}{done.stderr}"
    )
    return done


@pytest.mark.timeout(90)
def test_reading_commands(kg: Sandbox, memory: Volume) -> None:
    assert json.loads(volume_cli(kg, "ls", "--json").stdout) == ["agent"]
    listed = json.loads(volume_cli(kg, "ls", "agent", "--json").stdout)
    assert [f["path"] for f in listed] == ["lessons.md", "reports/r1.md"]
    old = json.loads(volume_cli(kg, "ls", "agent", "--version", "1", "--json").stdout)
    assert [(f["path"], f["size"]) for f in old] == [("lessons.md", 4)]
    shallow = json.loads(volume_cli(kg, "ls", "agent", "--no-recursive", "--json").stdout)
    assert [f["path"] for f in shallow] == ["lessons.md", "reports/"]
    assert "reports/r1.md" in volume_cli(kg, "ls", "agent").stdout

    assert volume_cli(kg, "cat", "agent", "lessons.md").stdout == "one\ntwo\n"
    assert volume_cli(kg, "cat", "agent", "lessons.md", "--version", "1").stdout == "one\n"
    body = json.loads(volume_cli(kg, "cat", "agent", "lessons.md", "--json").stdout)
    assert body == {"volume": "agent", "ref": "main", "version": 3, "path": "lessons.md",
                    "text": "one\ntwo\n"}  # fmt: skip

    versions = json.loads(volume_cli(kg, "versions", "agent", "--json").stdout)
    assert [(v["id"], v["parent_id"], v["paths"]) for v in versions] == [
        (1, None, ["lessons.md"]),
        (2, 1, ["lessons.md"]),
        (3, 2, ["reports/r1.md"]),
    ]
    assert "outside a task" in volume_cli(kg, "versions", "agent").stdout

    diff = volume_cli(kg, "diff", "agent", "1", "3").stdout
    assert diff == (
        "--- a/lessons.md\n+++ b/lessons.md\n@@ -1 +1,2 @@\n one\n+two\n"
        "--- /dev/null\n+++ b/reports/r1.md\n@@ -0,0 +1 @@\n+report\n"
    )
    assert "+one" in volume_cli(kg, "diff", "agent", "0", "1").stdout
    assert "hold the same files" in volume_cli(kg, "diff", "agent", "2", "2").stdout


@pytest.mark.timeout(90)
def test_rollback_and_fork(kg: Sandbox, memory: Volume) -> None:
    made = json.loads(volume_cli(kg, "rollback", "agent", "1", "--json").stdout)
    assert (made["id"], made["parent_id"], made["message"]) == (4, 3, "rollback to version 1")
    assert memory.read_text("lessons.md") == "one\n"
    assert not memory.exists("reports/r1.md")
    assert memory.at_version(3).read_text("reports/r1.md") == "report\n"

    out = volume_cli(kg, "fork", "agent", "experiment", "--version", "2").stdout
    assert "created ref experiment of agent at version 2" in out
    assert volume_cli(kg, "cat", "agent", "lessons.md", "--ref", "experiment").stdout == (
        "one\ntwo\n"
    )
    assert memory.forks() == ["experiment"]


@pytest.mark.timeout(90)
def test_errors_name_the_problem_and_exit_non_zero(kg: Sandbox, memory: Volume) -> None:
    missing = volume_cli(kg, "cat", "agent", "nope.md")
    assert missing.returncode == 1 and "no file 'nope.md'" in missing.stderr
    assert "volume_file_not_found" in missing.stderr
    ghost = volume_cli(kg, "versions", "ghost")
    assert ghost.returncode == 1 and "no volume named 'ghost'" in ghost.stderr
    old = volume_cli(kg, "cat", "agent", "lessons.md", "--version", "99")
    assert old.returncode == 1 and "no version 99" in old.stderr
    bad = volume_cli(kg, "cat", "agent", "../etc/passwd")
    assert bad.returncode == 1 and "'..'" in bad.stderr
    taken = volume_cli(kg, "fork", "agent", "main")
    assert taken.returncode == 1 and "already has a ref named 'main'" in taken.stderr
    assert json.loads(volume_cli(kg, "ls", "--json").stdout) == ["agent"]  # nothing created


@pytest.mark.timeout(90)
def test_gc_prints_what_it_dropped(kg: Sandbox, memory: Volume) -> None:
    store: Store = store_from_url(kg.url)
    try:
        Volume("agent", store=store, keep_versions=1)
    finally:
        access.call(store, store.close())
    dry = volume_cli(kg, "gc", "agent", "--dry-run")
    assert dry.returncode == 0 and "would drop 2 versions (1, 2)" in dry.stdout
    done = json.loads(volume_cli(kg, "gc", "agent", "--json").stdout)
    assert [v[1] for v in done["versions"]] == [1, 2] and done["objects"] > 0
    assert [v.id for v in memory.versions()] == [3]
    missing = volume_cli(kg, "gc", "nope")
    assert missing.returncode != 0 and "nope" in missing.stdout + missing.stderr


@pytest.mark.timeout(90)
def test_gc_dry_run_keeps_a_tagged_version_and_one_an_open_run_read(
    kg: Sandbox, memory: Volume
) -> None:
    from keepgoing._store.records import StartRequest  # noqa: PLC0415

    store: Store = store_from_url(kg.url)
    try:
        Volume("agent", store=store, keep_versions=1).tag("golden", 1)
        run = access.call(
            store,
            store.start_run(
                StartRequest(
                    run_id="reader",
                    workflow_id="reader",
                    workflow_name="wf",
                    input={},
                    task_queue="default",
                    code_version="v1",
                    now=1.0,
                )
            ),
        )
        access.call(store, store.volume_pin("agent", "main", 2, run_id=run.run_id, now=1.0))
    finally:
        access.call(store, store.close())
    dry = volume_cli(kg, "gc", "agent", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["versions"] == []
    assert [v.id for v in memory.versions()] == [1, 2, 3]
    assert memory.tags() == {"golden": 1}
