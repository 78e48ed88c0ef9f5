"""What ``/proc`` says about a process: read by the worker (its identity) and by the
group backends (which worker a replica runs), so neither imports the other."""

from __future__ import annotations

__all__ = ["read_text", "start_ticks"]


def read_text(path: str) -> str | None:
    """The stripped text of a small file, or None when it is missing or empty."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot; None if it is gone."""
    stat = read_text(f"/proc/{pid}/stat")
    if stat is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 of the whole line
    except (IndexError, ValueError):
        return None
