"""``python -m bench.runs_list``: the runs list over 100,000 runs, on both stores.

A store is filled with ``RUNS`` runs (100,000 by default) in bulk: 20 workflow
names, statuses mixed as a busy system has them (most completed, some failed,
running, blocked, cancelled), created over 30 days, errors on the failed ones.
Then each query below is asked ``--samples`` times through the HTTP API (the
server app in this process, over ASGI, auth off, its store the filled one) and
the median (p50) and p95 are reported. Target: p50 at most 200 ms for every
page query, on SQLite and on PostgreSQL.

Queries: the first page (50 runs); one status; two statuses; a workflow name;
a time range; page 100 reached by cursor; an id prefix; a text search, and
one that matches nothing (the worst case: every row is read); the trouble
filters (runs that lost a worker, rate-limited runs of one workflow); and the
counts by status and by trouble (unfiltered and by workflow). Runs carry
trouble counters as a troubled system has them: 2% lost a worker, 10% were
retried, half of those after a 429.

Examples::

    python -m bench.runs_list
    python -m bench.runs_list --store sqlite --runs 20000 --samples 11
    python -m bench.runs_list --quick            # 10,000 runs, a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from keepgoing._open_store import store_from_url
from keepgoing._server.app import create_app

RUNS = 100_000
TARGET_MS = 200.0
NAMES = [f"workflow_{n:02d}" for n in range(20)]
STATUSES = (
    ["completed"] * 80 + ["failed"] * 8 + ["running"] * 6 + ["cancelled"] * 3 + ["blocked"] * 3
)
DAY = 86_400.0
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
_COLUMNS = (
    "run_id, workflow_id, workflow_name, status, input, task_queue, code_version, "
    "created_at, updated_at, ended_at, error, blocked_reason, next_seq, "
    "worker_losses, retries, rate_limited"
)
_WIDTH = 16


def _rows(count: int, now: float) -> Iterator[tuple[Any, ...]]:
    rng = random.Random(7)
    for n in range(count):
        status = rng.choice(STATUSES)
        created = now - 30 * DAY + 30 * DAY * n / count
        ended = created + rng.uniform(0.1, 60) if status not in ("running", "blocked") else None
        error = None
        if status == "failed":
            error = json.dumps({"type": "ValueError", "message": f"quota exceeded for key {n}"})
        reason = "the code no longer replays step 3" if status == "blocked" else None
        losses = rng.randint(1, 2) if rng.random() < 0.02 else 0
        retries = rng.randint(1, 9) if rng.random() < 0.10 else 0
        limited = retries if retries and rng.random() < 0.5 else 0
        yield (
            secrets.token_hex(16),
            f"order-{n:07d}",
            NAMES[n % len(NAMES)],
            status,
            f'{{"n": {n}}}',
            "default",
            "v1",
            created,
            ended or created,
            ended,
            error,
            reason,
            2,
            losses,
            retries,
            limited,
        )


def admin_dsn() -> str:
    env = os.environ
    return (
        env.get("KEEPGOING_BENCH_POSTGRES_DSN")
        or env.get("KEEPGOING_TEST_POSTGRES_DSN")
        or DEFAULT_DSN
    )


@contextmanager
def filled(kind: str, count: int, now: float) -> Iterator[str]:
    """The URL of a migrated store of ``kind`` holding ``count`` runs; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="keepgoing-bench-runs-") as folder:
        if kind == "sqlite":
            url = f"sqlite:///{folder}/runs.db"
            asyncio.run(_migrate(url))
            import sqlite3  # noqa: PLC0415

            conn = sqlite3.connect(f"{folder}/runs.db")
            with conn:
                conn.executemany(
                    f"INSERT INTO runs ({_COLUMNS}) VALUES ({','.join('?' * _WIDTH)})",
                    _rows(count, now),
                )
            conn.execute("ANALYZE")
            conn.close()
            yield url
            return
        import psycopg  # noqa: PLC0415

        database = f"keepgoing_bench_runs_{secrets.token_hex(4)}"
        with psycopg.connect(admin_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{database}"')  # type: ignore[arg-type]
        url = urlunsplit(urlsplit(admin_dsn())._replace(path=f"/{database}"))
        try:
            asyncio.run(_migrate(url))
            with (
                psycopg.connect(url) as conn,
                conn.cursor() as cur,
                cur.copy(f"COPY runs ({_COLUMNS}) FROM STDIN") as copy,  # type: ignore[arg-type]
            ):
                for row in _rows(count, now):
                    copy.write_row(row)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE runs")
            yield url
        finally:
            with psycopg.connect(admin_dsn(), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')  # type: ignore[arg-type]


async def _migrate(url: str) -> None:
    store = store_from_url(url)
    await store.open()
    await store.close()


QUERIES: list[tuple[str, str, Callable[[float], dict[str, Any]]]] = [
    ("first page", "/api/v1/runs", lambda now: {}),
    ("status=failed", "/api/v1/runs", lambda now: {"status": "failed"}),
    ("status=running,blocked", "/api/v1/runs", lambda now: {"status": "running,blocked"}),
    ("workflow=", "/api/v1/runs", lambda now: {"workflow": "workflow_07"}),
    (
        "workflow= & status=failed",
        "/api/v1/runs",
        lambda now: {"workflow": "workflow_07", "status": "failed"},
    ),
    (
        "since/until (1 day)",
        "/api/v1/runs",
        lambda now: {"since": now - 10 * DAY, "until": now - 9 * DAY},
    ),
    ("page 100 by cursor", "cursor", lambda now: {}),
    ("id prefix", "/api/v1/runs", lambda now: {"id": "order-00123"}),
    ("q= (text)", "/api/v1/runs", lambda now: {"q": "quota exceeded for key 99"}),
    ("q= matching nothing (a full scan)", "/api/v1/runs", lambda now: {"q": "no such text"}),
    ("trouble=worker_lost", "/api/v1/runs", lambda now: {"trouble": "worker_lost"}),
    (
        "trouble=rate_limited & workflow=",
        "/api/v1/runs",
        lambda now: {"trouble": "rate_limited", "workflow": "workflow_07"},
    ),
    ("counts", "/api/v1/run-counts", lambda now: {}),
    ("counts, workflow=", "/api/v1/run-counts", lambda now: {"workflow": "workflow_07"}),
]


async def _measure(url: str, samples: int, now: float) -> dict[str, tuple[float, float]]:
    app = create_app(store_from_url(url), services=False, auth=False)
    figures: dict[str, tuple[float, float]] = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8711") as api:
            # The cursor of page 100, found once (walking there is 99 page queries).
            cursor = None
            for _ in range(99):
                page = (
                    await api.get("/api/v1/runs", params={**({"cursor": cursor} if cursor else {})})
                ).json()
                cursor = page["next_cursor"]
            for label, route, params_of in QUERIES:
                params = params_of(now)
                path = route
                if route == "cursor":
                    path, params = "/api/v1/runs", {"cursor": cursor}
                times = []
                for _ in range(samples + 1):
                    start = time.perf_counter()
                    response = await api.get(path, params=params)
                    elapsed = (time.perf_counter() - start) * 1000
                    if response.status_code != 200:
                        raise SystemExit(f"{label}: {response.status_code} {response.text}")
                    times.append(elapsed)
                times = times[1:]  # the first warms the caches
                times.sort()
                p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
                figures[label] = (statistics.median(times), p95)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.runs_list", description=__doc__)
    parser.add_argument("--store", action="append", choices=("sqlite", "postgresql"))
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--samples", type=int, default=21)
    parser.add_argument("--quick", action="store_true", help="10,000 runs, 5 samples")
    args = parser.parse_args(argv)
    count, samples = (10_000, 5) if args.quick else (args.runs, max(3, args.samples))
    now = time.time()
    missed = []
    print(
        f"runs list over {count:,} runs; p50 / p95 of {samples} requests (ms); "
        f"target p50 <= {TARGET_MS:g} ms"
    )
    for kind in args.store or ("sqlite", "postgresql"):
        started = time.perf_counter()
        with filled(kind, count, now) as url:
            fill = time.perf_counter() - started
            figures = asyncio.run(_measure(url, samples, now))
        print(f"\n{kind} (filled in {fill:.1f}s)")
        for label, (p50, p95) in figures.items():
            met = "met" if p50 <= TARGET_MS else "MISSED"
            if p50 > TARGET_MS:
                missed.append(f"{kind} {label}")
            print(f"  {label:<36} {p50:8.1f} {p95:8.1f}   {met}")
    if missed:
        print(f"\nmissed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
