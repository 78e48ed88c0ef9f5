"""SQLite at start-up: wait where waiting helps, a clear error at once where it cannot.

Waiting helps when the file is locked by another process (migrating it) and when
the store's folder is a link to a place that is not there yet (a volume not
mounted yet). A read-only folder or file system cannot be waited out.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

import keepgoing
from integration._support import wait_until
from keepgoing.errors import WorkflowNotFoundError

from .conftest import Processes

pytestmark = pytest.mark.timeout(60)

WAITING = "waiting for the store"
CONNECTED = "connected to the store"


def _serves(url: str, workflow_id: str) -> object:
    with keepgoing.Client(store=url) as client:

        def trigger() -> object:
            try:
                return client.trigger_workflow("five_steps", {"run": 1}, workflow_id=workflow_id)
            except WorkflowNotFoundError:
                return None

        handle = wait_until(trigger, 30, "a worker to record five_steps")
        return client.result(handle, timeout=30)  # type: ignore[arg-type]


def _hold_migration_lock(path: Path) -> sqlite3.Connection:
    """What another process migrating the file holds: an open write transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("CREATE TABLE migrating (x INTEGER)")
    return conn


def test_a_worker_waits_for_a_file_locked_by_a_migration_then_serves(
    tmp_path: Path, procs: Processes, app: Path
) -> None:
    db = tmp_path / "kg.db"
    url = f"sqlite:///{db}"
    lock = _hold_migration_lock(db)
    try:
        worker = procs.start("worker", str(app), "--store", url, name="worker")
        wait_until(lambda: WAITING in worker.stderr(), 30, "the worker to say it waits")
        assert "is locked by another process" in worker.stderr()
        assert worker.alive(), worker.report()
        lock.execute("COMMIT")
    finally:
        lock.close()
    wait_until(lambda: CONNECTED in worker.stderr(), 30, "the worker to say it connected")
    assert _serves(url, "after-lock") == [10, 11, 12, 13, 14]
    assert worker.terminate() == 0
    assert worker.stderr().count(WAITING) == 1


def test_connect_timeout_gives_up_on_a_lock_that_stays(
    tmp_path: Path, procs: Processes, app: Path
) -> None:
    db = tmp_path / "kg.db"
    lock = _hold_migration_lock(db)
    try:
        worker = procs.start(
            "worker", str(app), "--store", f"sqlite:///{db}", "--connect-timeout", "0.5"
        )
        assert worker.proc.wait(timeout=30) == 1
    finally:
        lock.close()
    err = worker.stderr()
    assert "gave up waiting for the store after 0.5s (--connect-timeout)" in err, err
    assert "is locked by another process" in err and "Traceback" not in err, err


def test_a_folder_that_does_not_exist_yet_is_created(
    tmp_path: Path, procs: Processes, app: Path
) -> None:
    url = f"sqlite:///{tmp_path}/not/there/yet/kg.db"
    worker = procs.start("worker", str(app), "--store", url)
    assert _serves(url, "new-folder") == [10, 11, 12, 13, 14]
    assert worker.terminate() == 0
    assert WAITING not in worker.stderr()


def test_a_folder_linked_to_a_volume_not_there_yet_is_waited_for(
    tmp_path: Path, procs: Processes, app: Path
) -> None:
    volume = tmp_path / "volume"  # mounted later
    (tmp_path / "data").symlink_to(volume)
    url = f"sqlite:///{tmp_path}/data/kg.db"
    worker = procs.start("worker", str(app), "--store", url)
    wait_until(lambda: WAITING in worker.stderr(), 30, "the worker to say it waits")
    assert f"links to {volume}, which does not exist (yet)" in worker.stderr()
    assert not volume.exists()  # nothing was created in its place

    volume.mkdir()
    wait_until(lambda: CONNECTED in worker.stderr(), 30, "the worker to say it connected")
    assert _serves(url, "after-mount") == [10, 11, 12, 13, 14]
    assert (volume / "kg.db").exists()
    assert worker.terminate() == 0


def _read_only_command(folder: Path) -> list[str] | None:
    """A prefix that runs a command with ``folder`` read-only: a private mount
    namespace with a read-only tmpfs over it (as root), else None."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        return None
    script = f'mount -t tmpfs -o ro tmpfs "{folder}" && exec "$@"'
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"]


@pytest.mark.parametrize("where", ["folder", "subfolder"])
def test_a_read_only_folder_fails_at_once_with_the_reason(
    tmp_path: Path, procs: Processes, app: Path, where: str
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    prefix = _read_only_command(folder)
    if prefix is None:  # not root: permissions make the folder read-only
        folder.chmod(0o555)
    path = folder / "kg.db" if where == "folder" else folder / "sub" / "kg.db"
    try:
        worker = procs.start("worker", str(app), "--store", f"sqlite:///{path}", argv0=prefix)
        assert worker.proc.wait(timeout=30) == 1
    finally:
        folder.chmod(0o755)
    err = worker.stderr()
    assert WAITING not in err and "Traceback" not in err, err
    reason = "Read-only file system" if prefix else "Permission denied"
    if where == "folder":
        assert f"cannot open the SQLite store {path}" in err, err
        assert ("the file system is read-only" if prefix else "is not writable") in err, err
    else:
        assert f"cannot create the folder {path.parent} for the SQLite store" in err, err
        assert reason in err, err
