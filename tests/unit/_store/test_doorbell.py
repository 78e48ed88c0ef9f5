"""The SQLite store's doorbell: a ring reaches a waiter in another process's place,
and closing it leaves no socket open (an unclosed one warns when it is collected)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from keepgoing._store.doorbell import Doorbell


async def test_a_ring_wakes_a_waiter_of_another_bell_on_the_same_key(tmp_path: Path) -> None:
    key = str(tmp_path / "store.db")
    waiter, ringer = Doorbell(key), Doorbell(key)
    try:
        waiting = asyncio.ensure_future(waiter.wait(30.0, key=waiter))
        deadline = asyncio.get_running_loop().time() + 30
        while not os.path.isdir(waiter.folder) or not os.listdir(waiter.folder):
            assert asyncio.get_running_loop().time() < deadline, "the waiter never listened"
            await asyncio.sleep(0.001)
        ringer.ring()
        await asyncio.wait_for(waiting, 30)
    finally:
        waiter.close()
        ringer.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_closing_a_bell_that_rang_and_listened_leaves_no_socket_open(
    tmp_path: Path,
) -> None:
    before = _open_fds()
    bell = Doorbell(str(tmp_path / "store.db"))
    await bell.wait(0.0, key=bell)  # binds its receiving socket
    bell.ring()  # opens its sending socket
    assert _open_fds() == before + 2
    bell.close()
    assert _open_fds() == before  # an unclosed socket warns when it is collected
    bell.ring()  # a ring after the close opens its sender again, and closing closes it
    bell.close()
    assert _open_fds() == before
