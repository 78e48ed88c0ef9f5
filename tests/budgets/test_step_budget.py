"""What a step costs, counted, against budgets written here.

A real worker runs ``steps(1)`` and ``steps(20)`` nine times each, alternating,
on a SQLite file and on PostgreSQL (``_counting.py`` says what is counted and
how). ``one.*`` is a one-step run, its start included; ``per_step.*`` is
``(long - one) / 19``, the cost of each added sequential step. The least of
the nine runs (``_counting.costs`` says why not the median).

Lowering a budget is a one-line change. Raising one needs a reason in the
commit that does it: a step that costs more statements, commits or calls is
slower on every deployment.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from budgets._counting import (
    METRICS,
    Bench,
    Costs,
    costs,
    over_budget,
    postgres_status,
    sqlite_status,
    trace_sqlite,
    traced_postgres,
)
from keepgoing._store.sql import tasks
from postgres_support import migrated, reset

pytestmark = pytest.mark.timeout(60)

# Measured values in comments (the least of nine runs, several runs of this file, under
# a load average of 0.5-9). Statements and commits have room for one more empty pass of
# the worker in a 20-step run (about 2 statements and 1 commit, /19); calls 10-15%.
BUDGETS: dict[str, dict[str, float]] = {
    "sqlite": {
        "one.work": 19,  # 19: a start reads its workflow's recorded flow spec
        "one.control": 24,  # 22: BEGIN/COMMIT, and the busy timeout when the kind of call changes
        "one.commits": 6,  # 6
        "one.calls": 560,  # 489-536
        "per_step.work": 5.6,  # 5.16-5.26: one multi-row INSERT of the step's history
        "per_step.control": 3,  # 2.42: BEGIN and COMMIT; a PRAGMA pair in an empty claim pass
        "per_step.commits": 1.2,  # 1.0-1.11
        "per_step.calls": 190,  # 163-173
        "one.waits": 0,  # 0: no server
        "per_step.waits": 0,  # 0
    },
    "postgres": {
        "one.work": 19,  # 19: a start reads its workflow's recorded flow spec
        "one.control": 0,  # 0: BEGIN and COMMIT are the driver's, counted as commits
        "one.commits": 7,  # 6-7
        "one.calls": 680,  # 579-609
        "per_step.work": 5.6,  # 5.16
        "per_step.control": 0,  # 0
        "per_step.commits": 1.3,  # 1.11-1.16
        "per_step.calls": 215,  # 190-196
        "one.waits": 19,  # 17: the start, its activation and eager claim, the completion
        "per_step.waits": 2.5,  # 2.26: the run head with the completion, the COMMIT
    },
}


@pytest.fixture
def sqlite_bench(tmp_path: Path) -> Iterator[Bench]:
    from keepgoing._store.sqlite import SqliteStore  # noqa: PLC0415

    path = str(tmp_path / "budgets.db")
    with Bench(SqliteStore(path), sqlite_status(path), trace_sqlite) as bench:
        yield bench


@pytest.fixture
def postgres_bench(postgres_url: str) -> Iterator[Bench]:
    from keepgoing._store.postgres import PostgresStore  # noqa: PLC0415

    url = migrated(postgres_url)
    reset(url)
    with (
        Bench(PostgresStore(url), postgres_status(url)) as bench,
        traced_postgres(bench.counter, bench.status),
    ):
        yield bench


def _check(store: str, measured: Costs) -> None:
    figures = measured.figures()
    shown = ", ".join(f"{k}={v:.2f}" for k, v in figures.items())
    statements = "\n  ".join(sql[:160] for sql in measured.sample)
    assert over_budget(figures, BUDGETS[store]) == [], (
        f"{store}: {shown}\na one-step run's statements:\n  {statements}"
    )


def test_a_step_on_sqlite_stays_within_its_budget(sqlite_bench: Bench) -> None:
    _check("sqlite", costs(sqlite_bench))


def test_a_step_on_postgres_stays_within_its_budget(postgres_bench: Bench) -> None:
    _check("postgres", costs(postgres_bench))


def test_a_planted_statement_breaks_the_budget(
    sqlite_bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    complete = tasks.complete_task

    def with_extra(conn: object, *args: object, **kwargs: object) -> object:
        conn.execute("SELECT 1")  # type: ignore[attr-defined]
        return complete(conn, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tasks, "complete_task", with_extra)
    measured = costs(sqlite_bench, repeat=3)
    broken = over_budget(measured.figures(), BUDGETS["sqlite"])
    assert any(line.startswith("per_step.work") for line in broken), measured.figures()


def test_the_budgets_name_every_figure() -> None:
    figures = {f"{kind}.{m}" for kind in ("one", "per_step") for m in METRICS}
    for store, budget in BUDGETS.items():
        assert set(budget) == figures, store
