"""The root Typer app; each command group lives in its own module."""

from __future__ import annotations

import logging

import typer

__all__ = ["app", "setup_logging"]

app = typer.Typer(
    name="keepgoing",
    help="Durable execution for Python: kill the worker, the workflow keeps going.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@app.callback()
def _root() -> None:
    """Durable execution for Python: kill the worker, the workflow keeps going."""
