"""What the demo's side services share: a JSON handler, serving on a port the
starter reads from a file, and the starter's handle on the service's process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

__all__ = ["JsonHandler", "ServiceProcess", "serve"]


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that answers JSON and logs nothing (the service's log is its file)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(server: ThreadingHTTPServer, port_file: Path) -> None:
    """Write the port ``server`` listens on to ``port_file`` (whole, or not there yet),
    then serve until the process is stopped."""
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    os.replace(tmp, port_file)
    server.serve_forever()


class ServiceProcess:
    """A side service run as ``python -m MODULE --folder FOLDER ARGS...``, logging to
    ``FOLDER/NAME.log``; ready once it has written ``FOLDER/NAME.port``."""

    def __init__(
        self, module: str, folder: Path, name: str, args: list[str], *, what: str, timeout: float
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        port_file = folder / f"{name}.port"
        port_file.unlink(missing_ok=True)
        self._output = (folder / f"{name}.log").open("ab")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", module, "--folder", str(folder), *args],
            stdout=self._output,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while not port_file.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{what} did not start (see {folder}/{name}.log)")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._output.close()
