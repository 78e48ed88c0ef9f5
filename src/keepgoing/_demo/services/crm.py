"""A fake CRM as a real HTTP service, with a switch that drops the connection after a write.

Two kinds, as CRMs come:

* ``lookup``: every write carries the caller's ``X-Operation-Id``, and
  ``GET /operations/{id}`` answers what that operation did, so a caller whose
  answer was lost can look it up instead of writing again;
* ``legacy``: no lookup and no idempotency key; a lost answer leaves the
  caller unable to tell whether its write was applied.

Routes: ``PUT /customers/{id}`` (body ``{"fields": {...}}``) applies a write,
appends it to the CRM's own write log (``writes.jsonl`` in its folder) and
answers ``{"customer_id", "version", "operation_id"}``; ``GET /customers/{id}``;
``GET /operations/{id}`` (lookup kind only); ``POST /admin/drop-after-apply``
(``{"count": n}``: the next ``n`` writes are applied, then their connection is
closed with no answer); ``GET /admin/writes`` (the write log); ``GET /health``.

Run it with ``python -m keepgoing._demo.services.crm --folder DIR
--kind lookup``; it writes its port to ``DIR/crm-<kind>.port`` once it listens.
:class:`CrmService` starts one from Python and reads its log.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from keepgoing._demo.services.process import JsonHandler, ServiceProcess, serve

__all__ = ["CrmService", "main"]

KINDS = ("lookup", "legacy")


class _Crm:
    """The CRM's state: records, the operations it applied, the drop switch, its log."""

    def __init__(self, folder: Path, kind: str) -> None:
        self.kind = kind
        self.log = folder / f"writes-{kind}.jsonl"
        self.lock = threading.Lock()
        self.records: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.drops = 0

    def write(
        self, customer_id: str, fields: dict[str, Any], op: str | None
    ) -> tuple[dict[str, Any], bool]:
        """Apply a write; the answer and whether to drop the connection instead of answering."""
        with self.lock:
            record = self.records.setdefault(
                customer_id, {"customer_id": customer_id, "version": 0}
            )
            record.update(fields)
            record["version"] += 1
            answer = {"customer_id": customer_id, "version": record["version"], "operation_id": op}
            line = {
                "at": time.time(),
                "customer_id": customer_id,
                "fields": fields,
                "operation_id": op,
            }
            with self.log.open("a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
            if op is not None and self.kind == "lookup":
                self.operations[op] = answer
            drop = self.drops > 0
            self.drops -= 1 if drop else 0
            return answer, drop


def _handler(crm: _Crm) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def _body(self) -> Any:
            size = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(size) or b"{}")

        def do_GET(self) -> None:
            parts = self.path.strip("/").split("/")
            if parts == ["health"]:
                self._answer(200, {"kind": crm.kind})
            elif parts == ["admin", "writes"]:
                text = crm.log.read_text("utf-8") if crm.log.exists() else ""
                self._answer(200, [json.loads(x) for x in text.splitlines() if x])
            elif len(parts) == 2 and parts[0] == "customers" and parts[1] in crm.records:
                self._answer(200, crm.records[parts[1]])
            elif len(parts) == 2 and parts[0] == "operations" and crm.kind == "lookup":
                found = crm.operations.get(parts[1])
                self._answer(200 if found else 404, found or {"error": "no such operation"})
            else:
                self._answer(404, {"error": f"no route {self.path}"})

        def do_PUT(self) -> None:
            parts = self.path.strip("/").split("/")
            if len(parts) != 2 or parts[0] != "customers":
                self._answer(404, {"error": f"no route {self.path}"})
                return
            body = self._body()
            fields = body.get("fields") if isinstance(body, dict) else None
            if not isinstance(fields, dict):
                self._answer(400, {"error": "the body must be {'fields': {...}}"})
                return
            op = self.headers.get("X-Operation-Id") if crm.kind == "lookup" else None
            answer, drop = crm.write(parts[1], fields, op)
            if drop:  # applied, and the answer is lost on the way back
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._answer(200, answer)

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/admin/drop-after-apply":
                self._answer(404, {"error": f"no route {self.path}"})
                return
            count = self._body().get("count", 1)
            with crm.lock:
                crm.drops = int(count)
            self._answer(200, {"drops": crm.drops})

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--kind", choices=KINDS, default="lookup")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _handler(_Crm(args.folder, args.kind)))
    serve(server, args.folder / f"crm-{args.kind}.port")


class CrmService(ServiceProcess):
    """A CRM process started by the demo (stop it with :meth:`stop`)."""

    def __init__(self, folder: Path, kind: str = "lookup", *, timeout: float = 20.0) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        self.kind = kind
        super().__init__(
            "keepgoing._demo.services.crm",
            folder,
            f"crm-{kind}",
            ["--kind", kind],
            what=f"the {kind} CRM",
            timeout=timeout,
        )

    def drop_after_apply(self, count: int = 1) -> None:
        """Apply the next ``count`` writes, then drop their connections unanswered."""
        self._call("POST", "/admin/drop-after-apply", {"count": count})

    def writes(self, customer_id: str | None = None) -> list[dict[str, Any]]:
        """The CRM's own log of applied writes (of one customer)."""
        found: list[dict[str, Any]] = self._call("GET", "/admin/writes")
        return [w for w in found if customer_id is None or w["customer_id"] == customer_id]


if __name__ == "__main__":
    main()
