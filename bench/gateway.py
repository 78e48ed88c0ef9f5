"""``gateway``: what the model gateway adds to a call, against a local fake provider.

Run it with ``python -m bench.gateway`` (``--repeat N``, ``--quick``).

A fake OpenAI-compatible provider runs in its own process (uvicorn, answering
at once), and a real ``keepgoing server`` in another, on a fresh SQLite store
with the default settings (WAL, ``synchronous=FULL``), configured with one
model alias pointing at the fake. The client is one ``httpx.Client`` with
keep-alive, sending the same small request:

* **overhead per call** (not streamed): p50 of the call through the gateway
  (``/v1/chat/completions`` with a gateway key) minus p50 of the same call
  made straight to the fake. The gateway's share is the token check, the
  key's limits read, the provider call over a kept-alive connection and the
  ledger row's commit (one fsync). Target: p50 <= 2 ms.
* **added time to first token** (streamed): p50 of the time from sending
  the request to reading the first chunk that carries text, through the
  gateway, minus the same straight to the fake. Target: p50 <= 2 ms.
* **from a deployed replica**: both again, measured inside a step of a group the
  server deploys and runs (``bench/_gateway_app.py``): the replica reaches the
  gateway with the server URL and key minted for it, a plain call is
  ``keepgoing.gateway.chat`` (tied to its step, so the server also checks the run
  and attempt it names), and the direct calls come from the same process.
  Direct and gateway calls alternate there, sample by sample.

The key (and the group's, ``group:bench-gateway``) has a requests-per-minute
limit high enough never to refuse, so the admission (the transaction that reads
the key's usage and reserves the call) is part of every measured call. 300
samples per repetition after 30 of warm-up; medians over repetitions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench._harness import BenchError, Config, Measurement, median, percentile

BODY = {
    "model": "fast",
    "messages": [{"role": "user", "content": "What is the capital of France?"}],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_fake(port: int) -> None:
    """The fake provider (run in its own process): answers at once, streams three words."""
    import uvicorn  # noqa: PLC0415
    from starlette.applications import Starlette  # noqa: PLC0415
    from starlette.requests import Request  # noqa: PLC0415
    from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: PLC0415
    from starlette.routing import Route  # noqa: PLC0415

    usage = {"prompt_tokens": 14, "completion_tokens": 7, "total_tokens": 21}

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "Paris."},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                }
            )

        async def events() -> Any:
            def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
                payload = {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": body["model"],
                    "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
                }
                return b"data: " + json.dumps(payload).encode() + b"\n\n"

            yield chunk({"role": "assistant", "content": ""})
            for word in ("Paris ", "is ", "there."):
                yield chunk({"content": word})
            yield chunk({}, "stop")
            yield b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _wait_http(url: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{what} exited with {proc.returncode}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise BenchError(f"{what} did not start")


def _on_store(store_url: str, work: Any) -> Any:
    from keepgoing._open_store import store_from_url  # noqa: PLC0415

    async def main() -> Any:
        store = store_from_url(store_url)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def _make_key(
    store_url: str,
    name: str,
    *,
    permissions: list[str] | None = None,
    limited: bool = True,
) -> str:
    """A token (default: ``gateway.use``) and, when ``limited``, a requests-per-minute
    limit high enough never to refuse."""
    from keepgoing._server import tokens  # noqa: PLC0415
    from keepgoing._store.gateway_protocol import GatewayKey  # noqa: PLC0415

    async def work(store: Any) -> str:
        record, text = await tokens.create_token(
            store,
            name=name,
            kind="service",
            permissions=permissions or ["gateway.use"],
            actor_kind="user",
            actor_id="bench",
            now=time.time(),
        )
        if limited:
            await store.set_gateway_key(GatewayKey(record.token_id, requests_per_minute=10**9))
        return str(text)

    return str(_on_store(store_url, work))


def _plain(client: httpx.Client, url: str, headers: dict[str, str], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.post(url, json=BODY, headers=headers)
        samples.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise BenchError(f"{url} answered {response.status_code}: {response.text[:200]}")
    return samples


def _first_token(client: httpx.Client, url: str, headers: dict[str, str], n: int) -> list[float]:
    samples = []
    body = {**BODY, "stream": True}
    for _ in range(n):
        started = time.perf_counter()
        first = None
        with client.stream("POST", url, json=body, headers=headers) as response:
            for line in response.iter_lines():
                if first is None and line.startswith("data: {") and _has_text(line[6:]):
                    first = time.perf_counter() - started
        if first is None:
            raise BenchError(f"{url} streamed no text")
        samples.append(first)
    return samples


def _has_text(data: str) -> bool:
    choices = json.loads(data).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


@contextlib.contextmanager
def _stack(workdir: Path) -> Iterator[tuple[int, int, str]]:
    """The fake provider and a ``keepgoing server`` on a fresh store: (fake port, server
    port, store URL)."""
    fake_port, server_port = _free_port(), _free_port()
    store_url = f"sqlite:///{workdir / 'kg.db'}"
    config = workdir / "keepgoing.toml"
    config.write_text(
        f'[gateway.providers.fake]\ntype = "openai"\nbase_url = "http://127.0.0.1:{fake_port}/v1"\n'
        '[gateway.models.fast]\nprovider = "fake"\nmodel = "bench-model"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEPGOING_", "OTEL_"))}
    env["KEEPGOING_GROUPS_DIR"] = str(workdir / "groups")
    env["KEEPGOING_GROUPS_LOG_DIR"] = str(workdir / "logs")
    fake = subprocess.Popen([sys.executable, "-m", "bench.gateway", "--serve-fake", str(fake_port)])
    server = None
    try:
        _wait_http(f"http://127.0.0.1:{fake_port}/", fake, "the fake provider")
        # Migrate the store first: the server then opens it as it finds it.
        _make_key(store_url, "setup")
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "keepgoing.cli",
                "server",
                "--store",
                store_url,
                "--port",
                str(server_port),
                "--config",
                str(config),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_http(f"http://127.0.0.1:{server_port}/healthz", server, "keepgoing server")
        yield fake_port, server_port, store_url
    finally:
        for proc in (server, fake):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def _repetition(workdir: Path, samples: int, warmup: int) -> dict[str, float]:
    with _stack(workdir) as (fake_port, server_port, store_url):
        key = _make_key(store_url, "bench")
        direct = f"http://127.0.0.1:{fake_port}/v1/chat/completions"
        through = f"http://127.0.0.1:{server_port}/v1/chat/completions"
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(timeout=30) as client:
            _plain(client, direct, {}, warmup)
            _plain(client, through, auth, warmup)
            _first_token(client, direct, {}, warmup)
            _first_token(client, through, auth, warmup)
            plain_direct = _plain(client, direct, {}, samples)
            plain_through = _plain(client, through, auth, samples)
            ttft_direct = _first_token(client, direct, {}, samples)
            ttft_through = _first_token(client, through, auth, samples)
    return {
        "direct_p50": percentile(plain_direct, 50),
        "through_p50": percentile(plain_through, 50),
        "overhead_p50": percentile(plain_through, 50) - percentile(plain_direct, 50),
        "ttft_direct_p50": percentile(ttft_direct, 50),
        "ttft_through_p50": percentile(ttft_through, 50),
        "ttft_added_p50": percentile(ttft_through, 50) - percentile(ttft_direct, 50),
    }


GROUP = "bench-gateway"


def _replica_repetition(workdir: Path, samples: int, warmup: int) -> dict[str, float]:
    """The same calls made from a step of a deployed group's replica (see
    ``bench/_gateway_app.py``), which reaches the gateway with the key minted for it."""
    import keepgoing  # noqa: PLC0415
    from keepgoing._store.gateway_protocol import GatewayKey  # noqa: PLC0415

    with _stack(workdir) as (fake_port, server_port, store_url):
        admin = _make_key(store_url, "admin", permissions=["admin"], limited=False)
        # The group's key has a limit too, so its admission is measured as the key's above.
        _on_store(
            store_url,
            lambda s: s.set_gateway_key(GatewayKey(f"group:{GROUP}", requests_per_minute=10**9)),
        )
        with keepgoing.Client(f"http://127.0.0.1:{server_port}", token=admin) as remote:
            worker = keepgoing.deploy_workflow_worker(
                Path(__file__).parent / "_gateway_app.py",
                client=remote,
                name=GROUP,
                env={"BENCH_FAKE_URL": f"http://127.0.0.1:{fake_port}/v1"},
            )
            handle = worker.trigger("gateway_from_replica", {"samples": samples, "warmup": warmup})
            seen: dict[str, float] = remote.result(handle.workflow_id, timeout=1800)
    return {
        "direct_p50": seen["direct"],
        "through_p50": seen["through"],
        "overhead_p50": seen["through"] - seen["direct"],
        "ttft_direct_p50": seen["ttft_d"],
        "ttft_through_p50": seen["ttft_t"],
        "ttft_added_p50": seen["ttft_t"] - seen["ttft_d"],
    }


def _measurements(prefix: str, where: str, runs: list[dict[str, float]]) -> list[Measurement]:
    return [
        Measurement(
            f"{prefix}_overhead",
            f"gateway overhead per call (not streamed), p50{where}",
            "ms",
            [r["overhead_p50"] * 1000 for r in runs],
            target=2.0,
            op="<=",
            detail={"direct_p50_ms": median([r["direct_p50"] * 1000 for r in runs])},
        ),
        Measurement(
            f"{prefix}_ttft",
            f"added time to first token (streamed), p50{where}",
            "ms",
            [r["ttft_added_p50"] * 1000 for r in runs],
            target=2.0,
            op="<=",
            detail={"direct_ttft_p50_ms": median([r["ttft_direct_p50"] * 1000 for r in runs])},
        ),
    ]


def run(config: Config) -> list[Measurement]:
    samples, warmup = (60, 10) if config.quick else (300, 30)
    found: dict[str, list[dict[str, float]]] = {"client": [], "replica": []}
    for i in range(config.repeat):
        for where, repetition in (("client", _repetition), ("replica", _replica_repetition)):
            with tempfile.TemporaryDirectory(prefix="kg-bench-gateway-") as folder:
                figures = repetition(Path(folder), samples, warmup)
            found[where].append(figures)
            config.log(
                f"gateway rep {i + 1} ({where}): overhead p50 "
                f"{figures['overhead_p50'] * 1000:.2f} ms "
                f"(direct {figures['direct_p50'] * 1000:.2f}, "
                f"through {figures['through_p50'] * 1000:.2f}); "
                f"added ttft p50 {figures['ttft_added_p50'] * 1000:.2f} ms"
            )
    return [
        *_measurements("gateway", "", found["client"]),
        *_measurements("gateway_replica", ", from a deployed replica", found["replica"]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve-fake", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake is not None:
        serve_fake(args.serve_fake)
        return
    repeat = 3 if args.quick else max(3, args.repeat)
    for m in run(Config(repeat=repeat, quick=args.quick)):
        print(
            f"{m.name}: {m.value:.3f} {m.unit} (target {m.op} {m.target} {m.unit}); runs {m.runs}"
        )


if __name__ == "__main__":
    main()
