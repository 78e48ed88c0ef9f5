"""``python -m bench.volumes``: what versioned volumes cost, on the embedded SQLite store.

Three figures, each the median of ``--repeat`` repetitions (at least 3), each
repetition on a fresh SQLite file (``synchronous=FULL``, the default):

1. ``put_in_task``: the added cost per step of ``put_file`` of a 4 KiB text
   file inside a task, against the same task without it. Workflows of
   ``STEPS`` sequential steps run with ``Client.run_workflow`` (tasks in this
   process, every step recorded); per repetition ``(with - without) / STEPS``.
2. ``read_old``: reading a 100 KiB file at an old version out of 1,000
   versions: cold (the object cache emptied first, so every chunk is decoded
   from its delta chain) and warm.
3. ``storage``: the bytes 1,000 versions of a 100 KiB text file, each changing
   one line, add to the database file (``page_count * page_size`` after a
   checkpoint, minus that of an empty store), as a multiple of one copy.
   Target: under 10x. Also the logical bytes (compressed objects only).

4. ``diff_10k``: ``GET /api/v1/volumes/{name}/diff`` (the server app in
   this process) between two versions of a volume of ``DIFF_FILES`` (10,000)
   files that differ in one file: cold (both caches emptied, so both
   manifests are read and parsed) and warm. Target: under 100 ms. Also one
   page (1,000 paths) of a diff in which every file changed.

Examples::

    python -m bench.volumes
    python -m bench.volumes --repeat 5
    python -m bench.volumes --quick        # smaller, for a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from keepgoing import Client, Volume, task, workflow
from keepgoing._server.app import create_app
from keepgoing._store.sql import volumes as sql_volumes
from keepgoing._store.sql import volumes_core
from keepgoing._store.sqlite import SqliteStore
from keepgoing._store.volume_records import StagedCommit
from keepgoing._volumes import access

STEPS = 40
VERSIONS = 1000
FILE_KIB = 100
STORAGE_TARGET = 10.0
DIFF_FILES = 10_000
DIFF_TARGET_MS = 100.0
NOTE = ("the agent writes a line of notes to its scratchpad, sixty-four bytes\n"[:63] + "\n") * 64

_WORDS = ["agent", "memory", "lesson", "note", "tool", "call", "result", "retry", "timeout"]


# -- 1. put_file inside a task ------------------------------------------------------------------
@task(name="bench.volumes.with_put")
def with_put(step: int) -> int:
    Volume("bench-notes").put_file("notes.md", f"step {step}\n{NOTE}")
    return step


@task(name="bench.volumes.without_put")
def without_put(step: int) -> int:
    return step


@workflow(name="bench.volumes.writes")
async def writes(steps: int) -> int:
    for step in range(steps):
        await with_put(step)
    return steps


@workflow(name="bench.volumes.plain")
async def plain(steps: int) -> int:
    for step in range(steps):
        await without_put(step)
    return steps


def put_in_task(folder: Path, steps: int, runs: int) -> dict[str, float]:
    """Median ms per step with and without the put, and their difference."""
    store = SqliteStore(str(folder / "put.db"))
    client = Client(store=store)
    try:
        client.run_workflow(writes, {"steps": 2})  # warm-up: imports, the volume, caches
        client.run_workflow(plain, {"steps": 2})
        with_ms, without_ms = [], []
        for _ in range(runs):
            for wf, into in ((writes, with_ms), (plain, without_ms)):
                began = time.perf_counter()
                client.run_workflow(wf, {"steps": steps})
                into.append((time.perf_counter() - began) / steps * 1000)
        versions = len(Volume("bench-notes", store=store).versions(limit=10_000))
        assert versions == 2 + runs * steps, versions
    finally:
        client.close()
    w, wo = statistics.median(with_ms), statistics.median(without_ms)
    return {"with_ms": w, "without_ms": wo, "added_ms": w - wo}


# -- 2 and 3. 1,000 versions of a 100 KiB file -------------------------------------------------
def _lines(rng: random.Random, kib: int) -> list[str]:
    lines: list[str] = []
    size = 0
    while size < kib * 1024:
        line = f"{len(lines):05d} " + " ".join(
            rng.choice(_WORDS) for _ in range(rng.randint(5, 12))
        )
        lines.append(line)
        size += len(line) + 1
    return lines


def _page_bytes(path: str) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        return int(pages * conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()


def versions_of_a_file(folder: Path, versions: int, seed: int) -> dict[str, float]:
    """Write ``versions`` versions; measure storage, commit time and reads at old versions."""
    empty = folder / "empty.db"
    asyncio.run(_open_and_close(SqliteStore(str(empty))))
    path = str(folder / "versions.db")
    store = SqliteStore(path)
    rng = random.Random(seed)
    lines = _lines(rng, FILE_KIB)
    one_copy = len("\n".join(lines).encode())
    commit_ms = []
    try:
        access.call(store, store.volume_open("big", create=True, now=time.time()))
        for i in range(versions):
            k = rng.randrange(len(lines))
            lines[k] = f"{k:05d} edited in version {i + 1}: " + " ".join(rng.sample(_WORDS, 4))
            staged = StagedCommit("big", puts=(("file.txt", "\n".join(lines).encode()),))
            began = time.perf_counter()
            access.call(store, store.volume_commit(staged, now=time.time()))
            commit_ms.append((time.perf_counter() - began) * 1000)
        reads = _reads(Volume("big", store=store, create_if_missing=False), versions, rng)
    finally:
        access.call(store, store.close())
    conn = sqlite3.connect(path)
    logical = conn.execute("SELECT SUM(LENGTH(data)) FROM volume_objects").fetchone()[0]
    conn.close()
    added = _page_bytes(path) - _page_bytes(str(empty))
    return {
        "one_copy_bytes": one_copy,
        "db_bytes_added": added,
        "ratio": added / one_copy,
        "logical_ratio": logical / one_copy,
        "commit_ms": statistics.median(commit_ms),
        **reads,
    }


def _reads(volume: Volume, versions: int, rng: random.Random) -> dict[str, float]:
    olds = [1, versions // 4, versions // 2, *rng.sample(range(2, versions), 7)]
    cold, warm = [], []
    for number in olds:
        view = volume.at_version(number)
        sql_volumes._CACHE.clear()
        cold.append(_timed(lambda v=view: v.read_file("file.txt")))
        warm.append(_timed(lambda v=view: v.read_file("file.txt")))
    return {"read_cold_ms": statistics.median(cold), "read_warm_ms": statistics.median(warm)}


def _timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return (time.perf_counter() - began) * 1000


# -- 4. a diff in a 10k-file volume ---------------------------------------------------------------
def diff_10k(folder: Path, files: int) -> dict[str, float]:
    return asyncio.run(_diff_10k(folder, files))


async def _diff_10k(folder: Path, files: int) -> dict[str, float]:
    store = SqliteStore(str(folder / "diff.db"))
    await store.open()
    now = time.time()
    await store.volume_open("big", create=True, now=now)
    puts = tuple((f"docs/{i:05d}.md", f"note {i}\n{NOTE[:200]}".encode()) for i in range(files))
    await store.volume_commit(StagedCommit("big", puts=puts), now=now)
    one = (("docs/04242.md", b"changed\n"),)
    await store.volume_commit(StagedCommit("big", puts=one), now=now)
    every = tuple((p, d + b"more\n") for p, d in puts)
    await store.volume_commit(StagedCommit("big", puts=every), now=now)
    await store.close()
    app = create_app(SqliteStore(str(folder / "diff.db")), services=False, auth=False)
    figures: dict[str, float] = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8711") as api:

            async def timed(params: dict[str, int], key: str) -> None:
                started = time.perf_counter()
                response = await api.get("/api/v1/volumes/big/diff", params=params)
                figures[key] = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"diff failed: {response.status_code} {response.text}")

            volumes_core.clear_caches()
            sql_volumes._CACHE.clear()
            await timed({"a": 1, "b": 2}, "diff_one_cold_ms")
            await timed({"a": 1, "b": 2}, "diff_one_warm_ms")
            await timed({"a": 2, "b": 3, "limit": 1000}, "diff_page_all_changed_ms")
    return figures


async def _open_and_close(store: SqliteStore) -> None:
    await store.open()
    await store.close()


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.volumes", description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (at least 3)")
    parser.add_argument("--quick", action="store_true", help="fewer steps and versions")
    args = parser.parse_args(argv)
    if args.repeat < 3:
        parser.error("--repeat must be at least 3: each figure is a median of repetitions")
    steps, versions = (10, 200) if args.quick else (STEPS, VERSIONS)
    put_runs: list[dict[str, float]] = []
    file_runs: list[dict[str, float]] = []
    diff_runs: list[dict[str, float]] = []
    for rep in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="kg-bench-volumes-") as tmp:
            folder = Path(tmp)
            put_runs.append(put_in_task(folder, steps, runs=3))
            file_runs.append(versions_of_a_file(folder, versions, seed=rep))
            diff_runs.append(diff_10k(folder, DIFF_FILES))
        print(
            f"rep {rep + 1}: {_line(put_runs[-1])} | {_line(file_runs[-1])} "
            f"| {_line(diff_runs[-1])}",
            flush=True,
        )
    _report(put_runs, file_runs, steps, versions, args.repeat)
    _report_diff(diff_runs)
    ratio = statistics.median(r["ratio"] for r in file_runs)
    diff_ms = statistics.median(r["diff_one_cold_ms"] for r in diff_runs)
    return 0 if (ratio < STORAGE_TARGET and diff_ms < DIFF_TARGET_MS) or args.quick else 1


def _report_diff(runs: list[dict[str, float]]) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    cold = med("diff_one_cold_ms")
    verdict = "met" if cold < DIFF_TARGET_MS else "NOT met"
    print(f"4. diff over HTTP of a {DIFF_FILES:,}-file volume, one file changed:")
    print(f"     cold (caches emptied)  {cold:8.2f} ms (target < {DIFF_TARGET_MS:g} ms: {verdict})")
    print(f"     warm                   {med('diff_one_warm_ms'):8.2f} ms")
    print(f"   one page (1,000 paths) of a diff where all {DIFF_FILES:,} changed:")
    print(f"                            {med('diff_page_all_changed_ms'):8.2f} ms")


def _line(figures: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.3g}" for k, v in figures.items())


def _report(
    put_runs: list[dict[str, float]],
    file_runs: list[dict[str, float]],
    steps: int,
    versions: int,
    repeat: int,
) -> None:
    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    ratio = med(file_runs, "ratio")
    verdict = "met" if ratio < STORAGE_TARGET else "NOT met"
    print(f"\nvolumes on SQLite (synchronous=FULL), median of {repeat} repetitions, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}")  # fmt: skip
    print(f"1. put_file of 4 KiB inside a task ({steps}-step workflows):")
    print(f"     step with the put      {med(put_runs, 'with_ms'):8.2f} ms")
    print(f"     step without it        {med(put_runs, 'without_ms'):8.2f} ms")
    print(f"     added by the put       {med(put_runs, 'added_ms'):8.2f} ms per step")
    print(f"2. read a {FILE_KIB} KiB file at an old version (of {versions}):")
    print(f"     cold (cache emptied)   {med(file_runs, 'read_cold_ms'):8.2f} ms")
    print(f"     warm                   {med(file_runs, 'read_warm_ms'):8.2f} ms")
    print(f"3. {versions} versions of a {FILE_KIB} KiB file, one line changed each time:")
    print(f"     database bytes added   {med(file_runs, 'db_bytes_added'):10,.0f}")
    print(f"     one copy               {med(file_runs, 'one_copy_bytes'):10,.0f}")
    print(f"     ratio                  {ratio:8.2f}x (target < {STORAGE_TARGET:g}x: {verdict})")
    print(f"     logical (objects only) {med(file_runs, 'logical_ratio'):8.2f}x")
    print(f"     commit of one version  {med(file_runs, 'commit_ms'):8.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
