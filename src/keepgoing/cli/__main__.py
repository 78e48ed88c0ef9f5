"""Entry point of the ``keepgoing`` command."""

from __future__ import annotations

from keepgoing.cli import audit as _audit  # noqa: F401
from keepgoing.cli import demo as _demo  # noqa: F401  (registers the command)
from keepgoing.cli import dev as _dev  # noqa: F401
from keepgoing.cli import gateway as _gateway  # noqa: F401
from keepgoing.cli import groups as _groups  # noqa: F401
from keepgoing.cli import history as _history  # noqa: F401
from keepgoing.cli import messages as _messages  # noqa: F401
from keepgoing.cli import operations as _operations  # noqa: F401
from keepgoing.cli import orchestrator as _orchestrator  # noqa: F401
from keepgoing.cli import recovery as _recovery  # noqa: F401
from keepgoing.cli import replay as _replay  # noqa: F401
from keepgoing.cli import retention as _retention  # noqa: F401
from keepgoing.cli import runs as _runs  # noqa: F401
from keepgoing.cli import schedules as _schedules  # noqa: F401
from keepgoing.cli import server as _server  # noqa: F401
from keepgoing.cli import show as _show  # noqa: F401
from keepgoing.cli import store as _store  # noqa: F401
from keepgoing.cli import token as _token  # noqa: F401
from keepgoing.cli import volume as _volume  # noqa: F401
from keepgoing.cli import worker as _worker  # noqa: F401
from keepgoing.cli import workers as _workers  # noqa: F401
from keepgoing.cli._app import app

__all__ = ["main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
