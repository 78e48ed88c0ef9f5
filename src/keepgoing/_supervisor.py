"""A replica's tie to the process that started it.

The local backend starts each replica in a session of its own (so a terminal's
Ctrl-C does not reach it), which also means nothing stops it when the server
that started it dies: a server killed with SIGKILL used to leave its replicas
running, claiming work nobody would scale down. A replica is started with
``KEEPGOING_SUPERVISOR_PID`` naming its parent; :func:`watch` opens a pidfd on
that process and stops the worker gracefully (drain, hand attempts back) the
moment it exits, with no polling. A parent already gone when the worker starts
(the replica was re-parented) stops it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

__all__ = ["ENV", "watch"]

#: The environment variable naming the process a worker must not outlive.
ENV = "KEEPGOING_SUPERVISOR_PID"


def supervisor_pid(environ: dict[str, str] | None = None) -> int | None:
    """The pid ``KEEPGOING_SUPERVISOR_PID`` names, or ``None`` when unset.

    Raises:
        ValueError: the variable is set to something other than a positive pid.
    """
    text = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) <= 1:
        raise ValueError(
            f"{ENV} must be the pid of the process that started the worker, not {text!r}"
        )
    return int(text)


def watch(loop: asyncio.AbstractEventLoop, on_gone: Callable[[], None]) -> Callable[[], None]:
    """Call ``on_gone`` in ``loop`` once the supervisor exits (at once if it is gone).

    Returns a function that stops watching. Without ``KEEPGOING_SUPERVISOR_PID``
    (a worker started by hand) nothing is watched.
    """
    pid = supervisor_pid()
    if pid is None:
        return lambda: None
    if os.getppid() != pid:  # re-parented already: its supervisor died before it looked
        loop.call_soon(on_gone)
        return lambda: None
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here (or the pid just went): check once
        if os.getppid() != pid:
            loop.call_soon(on_gone)
        return lambda: None
    if os.getppid() != pid:  # it exited between the check and the open: fd names another
        os.close(fd)
        loop.call_soon(on_gone)
        return lambda: None

    def gone() -> None:
        stop()
        on_gone()

    def stop() -> None:
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(fd)
            os.close(fd)

    loop.add_reader(fd, gone)
    return stop
