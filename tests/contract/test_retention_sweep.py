"""The retention sweep on every store: archived first, then deleted, one sweeper at a time."""

from __future__ import annotations

from pathlib import Path

from keepgoing._history.codec import loads_history
from keepgoing._history.events import WorkflowCompleted, WorkflowStarted
from keepgoing._store.protocol import Store
from keepgoing._store.retention_protocol import RetentionWindow
from keepgoing._worker.archive import find_archived, read_archive, read_history_text
from keepgoing._worker.retention import RetentionPolicy, RetentionSweep
from keepgoing.testing import FakeClock

from ._builders import NOW
from .test_retention import DAY, _ended


def _sweep(store: Store, clock: FakeClock, **policy: object) -> RetentionSweep:
    return RetentionSweep(store, RetentionPolicy(**policy), clock=clock, owner="s1")  # type: ignore[arg-type]


async def test_a_sweep_archives_each_run_then_deletes_it(store: Store, tmp_path: Path) -> None:
    runs = [await _ended(store, f"wf-{i}") for i in range(3)]
    clock = FakeClock(NOW + DAY + 1)
    sweep = _sweep(store, clock, runs=DAY, archive=str(tmp_path), batch=2)

    more = await sweep.tick()

    for run_id in runs:
        assert await store.get_run(run_id) is None
        (path,) = find_archived(tmp_path, run_id)
        body = read_archive(path)
        assert body["run"]["status"] == "completed" and body["run"]["result"] == {
            "ok": body["run"]["workflow_id"]
        }
        events = loads_history(read_history_text(path))
        assert isinstance(events[0], WorkflowStarted) and isinstance(events[-1], WorkflowCompleted)
    assert not more
    assert [p.name.split(".")[0] for p in find_archived(tmp_path, "wf-1")] == ["wf-1"]


async def test_only_the_holder_of_the_lease_sweeps(store: Store) -> None:
    await _ended(store, "wf-1")
    clock = FakeClock(NOW + DAY + 1)
    assert await store.claim_service("retention", "other", ttl=600, now=clock.now())

    await _sweep(store, clock, runs=DAY).tick()

    assert await store.get_run("run-wf-1") is not None


async def test_a_sweep_with_retention_off_deletes_nothing(store: Store) -> None:
    await _ended(store, "wf-1")
    clock = FakeClock(NOW + 1000 * DAY)

    await _sweep(store, clock).tick()

    assert await store.get_run("run-wf-1") is not None
    assert await store.list_audit(limit=5) == []


async def test_a_dry_run_lists_and_keeps(store: Store) -> None:
    await _ended(store, "wf-1")
    sweep = _sweep(store, FakeClock(NOW))

    report = await sweep.sweep(RetentionWindow(now=NOW + 10, older_than=5.0), dry_run=True)

    assert [r.run_id for r in report.would_delete] == ["run-wf-1"]
    assert await store.get_run("run-wf-1") is not None


async def test_archived_runs_that_were_not_deleted_are_archived_again(
    store: Store, tmp_path: Path
) -> None:
    # A sweep killed between its archive and its delete: the runs are still there.
    await _ended(store, "wf-1")
    window = RetentionWindow(now=NOW + 2 * DAY, default=DAY)
    sweep = _sweep(store, FakeClock(NOW + 2 * DAY), runs=DAY, archive=str(tmp_path))
    (run,) = await store.expired_runs(window, 10)
    from keepgoing._worker.archive import write_archive  # noqa: PLC0415

    first = write_archive(tmp_path, run, await store.read_history(run.run_id))
    report = await sweep.sweep(window)

    assert report.swept.runs == 1 and report.archived == [str(first)]
    assert read_archive(first)["run"]["run_id"] == "run-wf-1"


async def test_a_pass_of_many_batches_writes_one_audit_entry_with_the_sums(store: Store) -> None:
    for i in range(5):
        await _ended(store, f"wf-{i}")
    clock = FakeClock(NOW + DAY + 1)
    ticks = iter(float(i) for i in range(100))  # every delete "takes" a second
    sweep = RetentionSweep(
        store,
        RetentionPolicy(runs=DAY, batch=2),
        clock=clock,
        owner="s1",
        timer=lambda: next(ticks),
    )

    await sweep.tick()

    (entry,) = await store.list_audit(action="retention.sweep", limit=10)
    assert entry.detail["runs"] == 5 and entry.detail["rows"]["runs"] == 5
    assert entry.detail["rows"]["tasks"] == 5
    assert sweep.batch_size == 1  # each slow delete halved the next batch


async def test_a_sweep_archives_through_an_fsspec_url(store: Store) -> None:
    import uuid  # noqa: PLC0415

    from keepgoing._worker.archive import locate  # noqa: PLC0415

    root = f"memory://kg-sweep-{uuid.uuid4().hex}/archive"
    run_id = await _ended(store, "wf-1")
    sweep = _sweep(store, FakeClock(NOW + DAY + 1), runs=DAY, archive=root)

    await sweep.tick()

    assert await store.get_run(run_id) is None
    (url,) = locate(root, run_id)
    assert url.startswith("memory://") and url.endswith(f"wf-1.{run_id}.json.gz")
    assert locate(root, "wf-1") == [url]
    assert read_archive(url)["run"]["status"] == "completed"
    events = loads_history(read_history_text(url))
    assert isinstance(events[-1], WorkflowCompleted)
