"""Where the demo's files are: the agent, its week of tickets, the recorded run.

``examples/support_digest/`` holds the one copy of the agent and its tickets. A
wheel ships them as ``keepgoing/_demo/support_digest/`` (hatch ``force-include``);
a checkout (an editable install) finds them in the repository's ``examples/``.
The recorded run is package data, written by ``python -m keepgoing._demo.record``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["RECORDING", "agent_file", "tickets_file"]

HERE = Path(__file__).resolve().parent
RECORDING = HERE / "recordings" / "support-digest.history.json"
_PACKAGED = HERE / "support_digest"
_CHECKOUT = HERE.parents[2] / "examples" / "support_digest"


def _find(name: str) -> Path:
    for folder in (_PACKAGED, _CHECKOUT):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(
        f"the demo's {name} is neither in {_PACKAGED} (a wheel) nor in {_CHECKOUT} (a checkout)"
    )


def agent_file() -> Path:
    """The support-digest agent (``examples/support_digest/agent.py``)."""
    return _find("agent.py")


def tickets_file() -> Path:
    """The week of fictional tickets the agent works through."""
    return _find("tickets.json")
