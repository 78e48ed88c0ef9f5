"""Retention in a real ``keepgoing server``: a server killed between its archive and its
delete loses nothing that was not archived, and the next server finishes the batch."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from keepgoing._open_store import store_from_url
from keepgoing._worker.archive import find_archived, read_archive
from retention_support import end_run

from ._support import Sandbox, WorkerProcess, free_port, wait_until

RUNS = 5


async def _ended_runs(url: str, ended_at: float) -> list[str]:
    store = store_from_url(url)
    await store.open()
    try:
        runs = [
            await end_run(store, f"run-{i}", f"nightly-{i}", now=ended_at, result={"n": i})
            for i in range(RUNS)
        ]
        return [run.run_id for run in runs]
    finally:
        await store.close()


async def _present(url: str, ids: list[str]) -> list[str]:
    store = store_from_url(url)
    await store.open()
    try:
        return [i for i in ids if await store.get_run(i) is not None]
    finally:
        await store.close()


def _server(kg: Sandbox, name: str, **env: str) -> WorkerProcess:
    argv = [sys.executable, "-m", "keepgoing.cli", "server", "--store", kg.url]
    argv += ["--port", str(free_port()), "--no-auth"]
    return WorkerProcess(name, argv, kg.root, {**kg.env(), **env})


def test_a_server_killed_mid_sweep_loses_nothing_and_the_next_one_finishes(
    kg: Sandbox, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    (tmp_path / "keepgoing.toml").write_text(
        f'[retention]\nruns = "1m"\narchive = "{archive}"\nbatch = 2\ninterval = "1s"\n'
    )
    ids = asyncio.run(_ended_runs(kg.url, time.time() - 3600))

    first = _server(kg, "server1", KEEPGOING_FAULT_POINT="retention.archived")
    try:
        first.proc.wait(timeout=60)  # it kills itself after archiving its first batch
        assert first.proc.returncode == -9, first.report()
    finally:
        first.reap()
    archived = [p for i in ids for p in find_archived(archive, i)]
    assert len(archived) == 2
    assert asyncio.run(_present(kg.url, ids)) == ids  # archived, not yet deleted

    second = _server(kg, "server2")
    try:
        wait_until(lambda: not asyncio.run(_present(kg.url, ids)), 40, "the sweep to finish")
        assert "retention" in second.stderr() or second.alive()
    finally:
        second.terminate()
        second.reap()
        print(second.report())
    for run_id in ids:
        (path,) = find_archived(archive, run_id)
        assert read_archive(path)["run"]["status"] == "completed"


def test_the_server_says_once_that_retention_is_off(kg: Sandbox) -> None:
    server = _server(kg, "server")
    try:
        wait_until(lambda: "listening" in server.stderr() + _out(server), 60, "the server")
        wait_until(lambda: "retention is off" in server.stderr() + _out(server), 30, "the notice")
        assert (server.stderr() + _out(server)).count("retention is off") == 1
    finally:
        server.terminate()
        server.reap()


def _out(proc: WorkerProcess) -> str:
    return proc.out_path.read_text(errors="replace")


def test_runs_prune_archives_then_deletes_and_runs_show_finds_the_archive(
    kg: Sandbox, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    ids = asyncio.run(_ended_runs(kg.url, time.time() - 3600))
    cli = [sys.executable, "-m", "keepgoing.cli"]

    dry = subprocess.run(
        [*cli, "runs", "prune", "--older-than", "30m", "--dry-run", "--store", kg.url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=kg.env(),
        check=True,
    )
    assert f"would delete {RUNS} run(s)" in dry.stdout
    done = subprocess.run(
        [
            *cli,
            *("runs", "prune", "--older-than", "30m", "--archive", str(archive)),
            *("--workflow", "nightly", "--store", kg.url),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=kg.env(),
        check=True,
    )
    assert f"deleted {RUNS} run(s)" in done.stdout and f"archived {RUNS}" in done.stdout
    assert asyncio.run(_present(kg.url, ids)) == []
    shown = subprocess.run(
        [*cli, "runs", "show", "run-3", "--archive", str(archive), "--store", kg.url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=kg.env(),
        check=True,
    )
    assert "status: completed" in shown.stdout and "archived:" in shown.stdout
    (path,) = find_archived(archive, "run-3")
    history = subprocess.run(
        [*cli, "history", "show", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=kg.env(),
        check=False,
    )
    assert history.returncode == 0, history.stderr
    replayed = subprocess.run(
        [*cli, "replay", str(kg.app("nightly")), str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=kg.env(),
        check=False,
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "ok" in replayed.stdout
    from_url = subprocess.run(  # the same archive through fsspec (keepgoing[archive])
        [*cli, "replay", str(kg.app("nightly")), path.as_uri()],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=kg.env(),
        check=False,
    )
    assert from_url.returncode == 0 and "ok" in from_url.stdout, from_url.stderr
    missing = subprocess.run(
        [*cli, "runs", "show", "nope", "--archive", str(archive), "--store", kg.url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=kg.env(),
        check=False,
    )
    assert missing.returncode == 1 and "no run 'nope'" in missing.stderr
