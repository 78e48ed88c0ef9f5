"""An external batch system as a real HTTP service: it runs jobs and signals their completion.

``POST /jobs`` (``{"job_id", "kind", "month", "seconds", "hold", "duplicate", "early"}``)
accepts a job once per ``job_id`` (a repeated submit answers the first one) and
runs it on a thread of its own. When the job ends, after ``seconds`` or, with
``hold``, once ``POST /jobs/{id}/release`` arrives, the service publishes the
external event ``job.completed`` with the job id as correlation id and
``<job id>-done`` as event id, through keepgoing's client (``--store`` or
``--url``/``--token``). ``duplicate`` publishes it twice, as a webhook retry
would; ``early`` publishes it before it even answers the submit, so the signal
arrives before the workflow waits for it. ``GET /jobs/{id}`` is a job's state,
``GET /admin/signals`` every publish it made.

Run it with ``python -m keepgoing._demo.services.jobs --folder DIR --store URL``;
it writes its port to ``DIR/jobs.port``. :class:`JobService` starts one from Python.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from keepgoing._demo.services.process import JsonHandler, ServiceProcess, serve

__all__ = ["JobService", "main"]


class _Jobs:
    def __init__(self, folder: Path, publish: Any) -> None:
        self.folder = folder
        self.publish = publish
        self.lock = threading.Lock()
        self.jobs: dict[str, dict[str, Any]] = {}
        self.releases: dict[str, threading.Event] = {}
        self.signals: list[dict[str, Any]] = []

    def submit(self, spec: dict[str, Any]) -> dict[str, Any]:
        job_id = str(spec["job_id"])
        with self.lock:
            if job_id in self.jobs:
                return self.jobs[job_id]
            job = {
                "job_id": job_id,
                "month": spec.get("month"),
                "state": "running",
                "submitted_at": time.time(),
            }
            self.jobs[job_id] = job
            self.releases[job_id] = threading.Event()
        if spec.get("early"):
            self._finish(job_id, spec)  # the signal beats the workflow to its wait
        else:
            threading.Thread(target=self._run, args=(job_id, spec), daemon=True).start()
        return job

    def _run(self, job_id: str, spec: dict[str, Any]) -> None:
        release = self.releases[job_id]
        if spec.get("hold"):
            release.wait()
        else:
            release.wait(float(spec.get("seconds", 5)))
        self._finish(job_id, spec)

    def _finish(self, job_id: str, spec: dict[str, Any]) -> None:
        result = {
            "job_id": job_id,
            "month": spec.get("month"),
            "rows": 18_432,
            "mismatches": 3,
            "status": "ok",
        }
        with self.lock:
            self.jobs[job_id].update(state="completed", result=result, completed_at=time.time())
        for _ in range(2 if spec.get("duplicate") else 1):  # a webhook retry sends it again
            event_id = self.publish(job_id, result)
            with self.lock:
                self.signals.append({"job_id": job_id, "at": time.time(), "event_id": event_id})


def _publisher(args: argparse.Namespace) -> Any:
    import keepgoing  # noqa: PLC0415 (only the service process needs it)

    client = (
        keepgoing.Client(args.url, token=args.token)
        if args.url
        else keepgoing.Client(store=args.store)
    )

    def publish(job_id: str, result: dict[str, Any]) -> str:
        return client.publish_event("job.completed", job_id, result, event_id=f"{job_id}-done")

    return publish


def _handler(jobs: _Jobs) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            parts = self.path.strip("/").split("/")
            if parts == ["health"]:
                self._answer(200, {"ok": True})
            elif parts == ["admin", "signals"]:
                with jobs.lock:
                    self._answer(200, list(jobs.signals))
            elif len(parts) == 2 and parts[0] == "jobs" and parts[1] in jobs.jobs:
                with jobs.lock:
                    self._answer(200, dict(jobs.jobs[parts[1]]))
            else:
                self._answer(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            parts = self.path.strip("/").split("/")
            size = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(size) or b"{}")
            if parts == ["jobs"] and isinstance(body, dict) and body.get("job_id"):
                self._answer(202, jobs.submit(body))
            elif (
                len(parts) == 3
                and parts[0] == "jobs"
                and parts[2] == "release"
                and parts[1] in jobs.releases
            ):
                jobs.releases[parts[1]].set()
                self._answer(200, {"released": parts[1]})
            else:
                self._answer(404, {"error": f"no route {self.path}"})

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--store", default=None)
    parser.add_argument("--url", default=None)
    parser.add_argument("--token", default=None)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    jobs = _Jobs(args.folder, _publisher(args))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _handler(jobs))
    serve(server, args.folder / "jobs.port")


class JobService(ServiceProcess):
    """The batch system process, started by the demo (stop it with :meth:`stop`)."""

    def __init__(self, folder: Path, *, store: str, timeout: float = 30.0) -> None:
        super().__init__(
            "keepgoing._demo.services.jobs",
            folder,
            "jobs",
            ["--store", store],
            what="the job service",
            timeout=timeout,
        )

    def job(self, job_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self._call("GET", f"/jobs/{job_id}")
        return found

    def release(self, job_id: str) -> None:
        """End a held job now: its completion signal goes out."""
        self._call("POST", f"/jobs/{job_id}/release", {})

    def signals(self, job_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._call("GET", "/admin/signals")
        return [s for s in found if s["job_id"] == job_id]


if __name__ == "__main__":
    main()
