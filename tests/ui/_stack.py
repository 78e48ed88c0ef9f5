"""A real ``keepgoing server`` and real ``keepgoing worker`` processes for the browser tests.

Built on :class:`tests.server._support.Stack`; the workers run ``apps/ui_app.py``
(copied next to the store) with ``KG_TEST_DIR`` set to the stack's folder, where
the tests drop the markers a held step waits for.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from server import _support
from server._support import Process, Stack, wait_until

__all__ = ["APPS", "UiStack", "run_store", "wait_until"]

APPS = Path(__file__).parent / "apps"
_plain_run_store = _support.run_store


def run_store(url: str, work: Callable[[Any], Any]) -> Any:
    """``run_store`` on a thread of its own: Playwright's sync API keeps an event loop
    running on the test's thread, where ``asyncio.run`` refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(_plain_run_store, url, work).result()


class UiStack(Stack):
    def token(self, name: str, *permissions: str, kind: str = "user") -> str:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(super().token, name, *permissions, kind=kind).result()

    def _serving(self, worker: Process) -> bool:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(super()._serving, worker).result()

    def start_ui_worker(self, name: str) -> Process:
        target = self.root / "ui_app.py"
        target.write_text((APPS / "ui_app.py").read_text())
        worker = Process(name, ["worker", str(target), "--store", self.store_url], self.root)
        self.processes.append(worker)
        wait_until(lambda: self._serving(worker), 30, f"{name} to serve")
        return worker

    def start(
        self, workflow_id: str, workflow: str = "support", **input: object
    ) -> dict[str, object]:
        with self.api(self.admin) as api:
            answer = api.post(
                "/api/v1/runs",
                json={"workflow": workflow, "workflow_id": workflow_id, "input": input},
            )
            assert answer.status_code in (200, 201), answer.text
            return dict(answer.json())

    def run(self, workflow_id: str) -> dict[str, object]:
        with self.api(self.admin) as api:
            return dict(api.get(f"/api/v1/runs/{workflow_id}").raise_for_status().json())

    def wait_status(self, workflow_id: str, status: str, timeout: float = 30.0) -> None:
        wait_until(
            lambda: self.run(workflow_id)["status"] == status,
            timeout,
            f"{workflow_id} to be {status}",
        )

    def release(self, ticket: str) -> None:
        (self.root / f"release-{ticket}").touch()

    def offers(self, path: str) -> bool:
        spec = httpx.get(f"{self.url}/openapi.json", timeout=10).json()
        return path in spec.get("paths", {})
