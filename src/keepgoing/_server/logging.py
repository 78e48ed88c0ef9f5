"""Server logs: readable lines by default, or one JSON object per line (``--log-json``).

A JSON line has ``ts`` (UNIX seconds), ``level``, ``logger``, ``message`` and
any fields passed as ``extra={"fields": {...}}`` — for requests: ``method``,
``path``, ``status``, ``duration_ms``, ``actor``.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

__all__ = ["JsonFormatter", "configure_logging"]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            body.update(fields)
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str, ensure_ascii=False)


def configure_logging(*, json_lines: bool = False, verbose: bool = False) -> None:
    """Send keepgoing's and uvicorn's logs to stderr in one format."""
    handler = logging.StreamHandler(sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # Requests are logged by keepgoing's own access log, with the caller.
    logging.getLogger("uvicorn.access").disabled = True
