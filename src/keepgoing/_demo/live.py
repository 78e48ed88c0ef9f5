"""``keepgoing demo`` (interactive, what ``make demo`` runs).

It serves the API and the UI with the demo's routes, deploys the agent's group
on the local backend, starts a live run, prints (and tries to open) the demo
page, and runs until Ctrl-C, which stops the server, the autoscaler and every
replica it started.
"""

from __future__ import annotations

import signal
import threading
import webbrowser
from pathlib import Path
from typing import Any

from rich.console import Console

from keepgoing._demo import routes
from keepgoing._demo.digest import Pace, deploy_agent, model_label
from keepgoing._demo.stack import LocalStack
from keepgoing._store.url import redact_url

__all__ = ["run_interactive"]


def run_interactive(
    folder: Path,
    *,
    store: str | None,
    fast: bool,
    port: int,
    open_browser: bool,
    stop: threading.Event | None = None,
) -> None:
    """Serve the demo until Ctrl-C (or until ``stop`` is set)."""
    console = Console()
    holder: dict[str, routes.DemoState] = {}

    def extra(app: object) -> None:
        holder["state"] = routes.DemoState(stack)
        routes.install(app, holder["state"])  # type: ignore[arg-type]

    stack = LocalStack(folder, store=store, fast=fast, port=port, extra=extra)
    console.print(f"[bold]keepgoing demo[/] — store [cyan]{redact_url(stack.store_url)}[/]")
    stopping = stop or threading.Event()
    previous = _on_signals(stopping)
    try:
        stack.start()
        state = holder["state"]
        page = f"{stack.server_url}/demo"
        console.print(f"server and UI on [cyan]{stack.server_url}[/] (authentication off)")
        console.print(f"model: {model_label()}")
        state.worker = deploy_agent(stack)
        console.print(f"deployed the agent's group {state.worker.scaling_group} (local backend)")
        workflow_id = state.start_live()
        pace = Pace.of(fast)
        console.print(
            f"started a live run: {workflow_id} ({pace.tickets} tickets, "
            f"{'under 30 s' if fast else 'about seven minutes'})"
        )
        console.print(f"\n[bold green]Open the demo:[/] {page}\n")
        console.print("Replay a recorded run, follow the live one, press Kill the worker.")
        console.print("Ctrl-C stops everything.")
        if open_browser:
            _open(page)
        while not stopping.wait(0.5):
            pass
        console.print("\nstopping the demo ...")
    finally:
        stack.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        console.print("stopped: the server, the autoscaler and its workers.")


def _on_signals(stopping: threading.Event) -> dict[int, Any]:
    """Ctrl-C and SIGTERM stop the demo cleanly (a second Ctrl-C too: it only sets the
    event again). Installed even where SIGINT was ignored (a background job)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, lambda *_: stopping.set())
    return previous


def _open(url: str) -> None:
    try:
        webbrowser.open(url, new=2)
    except Exception:  # a headless machine has no browser: the URL is printed
        return
