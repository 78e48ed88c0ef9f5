"""A real ``keepgoing server`` with a gateway configuration pointing at the fake providers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import httpx

from integration._support import free_port, wait_until
from keepgoing._open_store import store_from_url
from keepgoing._server import tokens
from keepgoing._store.gateway_protocol import GatewayKey
from keepgoing._store.protocol import Store

from ._fakes import Fake


def cli_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEPGOING_", "OTEL_"))}
    env["PYTHONUNBUFFERED"] = "1"
    env["KG_TEST_DIR"] = str(root)
    return env


def run_store(url: str, work: Callable[[Store], Any]) -> Any:
    """Run ``await work(store)`` on an opened store at ``url``."""

    async def main() -> Any:
        store = store_from_url(url)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def make_token(url: str, name: str, permissions: Sequence[str]) -> str:
    _, text = run_store(
        url,
        lambda s: tokens.create_token(
            s,
            name=name,
            kind="service",
            permissions=permissions,
            actor_kind="user",
            actor_id="test-setup",
            now=time.time(),
        ),
    )
    return str(text)


OPENAI_KEY = "sk-planted-openai-7f3a9c1e5b2d4f60"
ANTHROPIC_KEY = "sk-ant-planted-2c8e4a6b0d1f3e57"
PRICE = {"input": 300.0, "output": 600.0}  # dollars per million tokens: 21 in + 7 out = $0.0105


def config_text(openai: Fake, anthropic: Fake, prompts: str = "store") -> str:
    return f"""
[gateway]
prompts = "{prompts}"
timeout = 2

[gateway.providers.oa]
type = "openai"
base_url = "{openai.base_url}"
api_key_env = "FAKE_OPENAI_KEY"

[gateway.providers.an]
type = "anthropic"
base_url = "{anthropic.base_url}"
api_key_env = "FAKE_ANTHROPIC_KEY"

[gateway.models.gpt]
provider = "oa"
model = "gpt-4o-mini"
price = {{ input = {PRICE["input"]}, output = {PRICE["output"]} }}

[gateway.models.primary]
provider = "oa"
model = "gpt-4o-mini"
fallbacks = ["claude"]

[gateway.models.claude]
provider = "an"
model = "claude-3-5-haiku-latest"

[gateway.models.embed]
provider = "oa"
model = "text-embedding-3-small"
"""


class Proc:
    """A keepgoing subprocess with its own environment; output in files."""

    def __init__(self, name: str, args: Sequence[str], root: Path, env: dict[str, str]) -> None:
        self.name = name
        self.out_path = root / f"{name}.out"
        self.err_path = root / f"{name}.err"
        self._out: IO[bytes] = open(self.out_path, "wb")  # noqa: SIM115
        self._err: IO[bytes] = open(self.err_path, "wb")  # noqa: SIM115
        self.argv = [sys.executable, "-m", "keepgoing.cli", *args]
        self.proc = subprocess.Popen(
            self.argv, cwd=root, env={**cli_env(root), **env}, stdout=self._out, stderr=self._err
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        if not self._out.closed:
            self._out.flush()
            self._err.flush()
        return self.out_path.read_text(errors="replace") + self.err_path.read_text(errors="replace")

    def reap(self) -> None:
        """Stop it: SIGTERM first, so a server stops the replicas its autoscaler
        started (a SIGKILL would leave them running), then SIGKILL after 20 s."""
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(timeout=20)
        self._out.close()
        self._err.close()


class GatewayStack:
    def __init__(self, root: Path, openai: Fake, anthropic: Fake, store_url: str | None = None):
        self.root = root
        self.openai = openai
        self.anthropic = anthropic
        self.store_url = store_url or f"sqlite:///{root / 'kg.db'}?synchronous=normal"
        self.config = root / "keepgoing.toml"
        self.config.write_text(config_text(openai, anthropic))
        self.env = {
            "FAKE_OPENAI_KEY": OPENAI_KEY,
            "FAKE_ANTHROPIC_KEY": ANTHROPIC_KEY,
            "KEEPGOING_CONFIG": str(self.config),
        }
        self.processes: list[Proc] = []
        self.url = ""

    def start_server(self, *args: str) -> Proc:
        port = free_port()
        server = Proc(
            "server",
            ["server", "--store", self.store_url, "--port", str(port), "--log-json", *args],
            self.root,
            self.env,
        )
        self.processes.append(server)
        self.url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            if not server.alive():
                raise AssertionError(f"the server exited:\n{server.output()}")
            try:
                return httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(healthy, 30, "the server to be ready")
        return server

    def start_worker(self, app: Path, env: dict[str, str]) -> Proc:
        worker = Proc(
            f"worker{len(self.processes)}",
            ["worker", str(app), "--store", self.store_url],
            self.root,
            {**self.env, **env},
        )
        self.processes.append(worker)
        return worker

    def key(self, name: str, *, also: Sequence[str] = (), **limits: Any) -> str:
        """A token with ``gateway.use`` (and ``also``) and the given limits (GatewayKey
        fields)."""
        text = make_token(self.store_url, name, ["gateway.use", *also])
        token_id = text.split("_")[1]
        if limits:
            key = GatewayKey(token_id=token_id, **limits)
            run_store(self.store_url, lambda s: s.set_gateway_key(key))
        return text

    def calls(self, **filters: Any) -> list[Any]:
        return list(run_store(self.store_url, lambda s: s.list_gateway_calls(**filters)))

    def cleanup(self) -> None:
        for process in self.processes:
            process.reap()
        for process in self.processes:
            print(f"----- {process.name} -----\n{process.output()}")
