"""A deploy that moves runs on purpose: the replay check, then the switch, then the moves.

By default a deploy moves no run: each stays on the revision it started on.
With ``upgrade="auto"`` the deploy moves the open runs of the group's older
revisions to its new revision, and ``migrate`` names more runs to move. Before
anything is registered, the histories of those runs are replayed against the
new source (:mod:`keepgoing._groups.replaycheck`). If one would block, the
deploy is refused (:class:`DeployRefusedError`, with the runs and the diffs)
unless ``force``; with ``force`` the runs that would block stay where they are.

A run moves only if it was checked and its history has not grown since
(the move is conditional on the history's length): a run that took another
step between the check and the move stays pinned, and the outcome says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from keepgoing._groups.envs import build_env
from keepgoing._groups.registration import DeployPlan, register
from keepgoing._groups.replaycheck import (
    DEFAULT_PER_NAME,
    DEFAULT_TIME_LIMIT,
    ReplayReport,
    check_bounds,
    check_runs,
)
from keepgoing._groups.secrets import SecretBox
from keepgoing._groups.spec import GroupRevision
from keepgoing._store.group_records import OpenRun
from keepgoing._store.protocol import Store
from keepgoing.errors import DeployRefusedError, GroupError, KeepgoingError, RunNotFoundError

__all__ = [
    "DeployOptions",
    "DeployOutcome",
    "RunMove",
    "deploy_plan",
    "migrate_run",
    "refusal",
    "runs_to_move",
]

_MAX_NAMED = 1000


def refusal(report: ReplayReport) -> DeployRefusedError:
    count = len(report.failures)
    return DeployRefusedError(
        f"deploy refused: {count} run(s) would block on the new code "
        "(deploy with force to keep them on their revisions)\n" + report.summary(),
        report,
    )


@dataclass(frozen=True)
class DeployOptions:
    """What a deploy does with runs in flight (see the module doc)."""

    force: bool = False
    migrate: tuple[str, ...] = ()  # workflow ids or run ids to move too
    check_per_name: int = DEFAULT_PER_NAME
    check_time_limit: float = DEFAULT_TIME_LIMIT
    import_path: tuple[str, ...] = ()  # for the check (client side only)

    def to_body(self) -> dict[str, Any]:
        return {
            "force": self.force,
            "migrate": list(self.migrate),
            "check_per_name": self.check_per_name,
            "check_time_limit": self.check_time_limit,
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> DeployOptions:
        """Check and parse the options of a request; a bad field is a ``GroupError``."""
        force = body.get("force", False)
        if not isinstance(force, bool):
            raise GroupError("force must be true or false")
        migrate = body.get("migrate", [])
        if (
            not isinstance(migrate, list)
            or len(migrate) > _MAX_NAMED
            or not all(isinstance(m, str) and 0 < len(m) <= 200 for m in migrate)
        ):
            raise GroupError(f"migrate must be a list of at most {_MAX_NAMED} run or workflow ids")
        per_name, limit = check_bounds(
            body.get("check_per_name", DEFAULT_PER_NAME),
            body.get("check_time_limit", DEFAULT_TIME_LIMIT),
        )
        return cls(
            force=force, migrate=tuple(migrate), check_per_name=per_name, check_time_limit=limit
        )


@dataclass(frozen=True)
class DeployOutcome:
    """A deploy's revisions, its replay check, and the runs it moved or left pinned."""

    revisions: dict[str, int]
    report: ReplayReport | None = None
    moved: tuple[str, ...] = ()  # run ids now on the new revision
    pinned: dict[str, str] = field(default_factory=dict)  # run id -> why it stayed

    def to_body(self) -> dict[str, Any]:
        return {
            "revisions": self.revisions,
            "replay": None if self.report is None else self.report.to_body(),
            "moved": list(self.moved),
            "pinned": dict(self.pinned),
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> DeployOutcome:
        replay = body.get("replay")
        return cls(
            revisions={str(k): int(v) for k, v in body["revisions"].items()},
            report=None if replay is None else ReplayReport.from_body(replay),
            moved=tuple(body.get("moved", [])),
            pinned={str(k): str(v) for k, v in body.get("pinned", {}).items()},
        )


async def runs_to_move(store: Store, plan: DeployPlan, migrate: Sequence[str]) -> list[OpenRun]:
    """The open runs of the main group a deploy of ``plan`` would move.

    Raises:
        GroupError: a run named in ``migrate`` is not an open run of the group.
    """
    group = await store.get_group(plan.main.group)
    if group is None:
        if migrate:
            raise GroupError(f"group {plan.main.group!r} has no runs to migrate yet")
        return []
    open_runs = await store.open_runs_on(group.task_queue)
    named = set(migrate)
    found = {r.run_id for r in open_runs if r.run_id in named or r.workflow_id in named}
    missing = [m for m in migrate if not any(m in (r.run_id, r.workflow_id) for r in open_runs)]
    if missing:
        raise GroupError(
            f"no open run of group {plan.main.group!r} has the id {', '.join(map(repr, missing))}"
        )
    auto = plan.main.upgrade == "auto"
    return [r for r in open_runs if r.run_id in found or auto]


async def deploy_plan(
    store: Store,
    plan: DeployPlan,
    *,
    now: float,
    options: DeployOptions | None = None,
    box: SecretBox | None = None,
) -> DeployOutcome:
    """Check, register and move: a deploy as the module doc describes it.

    Raises:
        DeployRefusedError: a run to move would block on the new code (without force).
        GroupError: a bad plan or option, or the new code does not import.
    """
    options = options or DeployOptions()
    plan.check()
    moving = await runs_to_move(store, plan, options.migrate)
    report = None
    unchecked = ""
    if moving:
        try:
            report = await check_runs(
                store,
                moving,
                source=plan.main.source,
                filename=plan.main.filename,
                python=_python(plan),
                per_name=options.check_per_name,
                time_limit=options.check_time_limit,
                import_path=options.import_path,
            )
        except GroupError as exc:  # the new code does not import where the check runs
            if not options.force:
                raise
            unchecked = str(exc)
        if report is not None and report.failures and not options.force:
            raise refusal(report)
    revisions = await register(store, plan, now=now, box=box)
    if unchecked:  # forced past a check that could not run: every run stays
        pinned = {run.run_id: unchecked for run in moving}
        return DeployOutcome(revisions=revisions, pinned=pinned)
    if report is None:
        return DeployOutcome(revisions=revisions)
    target = revisions[plan.main.group]
    moved, pinned = [], {}
    for check in report.checked:
        if not check.ok:
            pinned[check.run_id] = "it would block on the new code"
            continue
        try:
            await store.migrate_run(
                check.workflow_id,
                check.run_id,
                to_revision=target,
                now=now,
                expect_seq=check.next_seq,
            )
        except KeepgoingError as exc:  # it moved on, or ended, since the check
            pinned[check.run_id] = str(exc)
        else:
            moved.append(check.run_id)
    for run_id in report.out_of_time:
        pinned[run_id] = "not checked within the time limit"
    return DeployOutcome(revisions=revisions, report=report, moved=tuple(moved), pinned=pinned)


def _python(plan: DeployPlan) -> str | None:
    """The interpreter the new code runs on here (its environment), if it can be had."""
    if plan.backend != "local":
        return None
    try:
        return build_env(plan.main.image, plan.main.dependencies).python
    except KeepgoingError:
        return None  # the check then says what does not import


@dataclass(frozen=True)
class RunMove:
    """A run moved by ``keepgoing runs migrate``: where it is now, and its check."""

    workflow_id: str
    run_id: str
    from_revision: int | None
    to_revision: int
    report: ReplayReport | None = None

    def to_body(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id,
            "run_id": self.run_id,
            "from_revision": self.from_revision,
            "to_revision": self.to_revision,
            "replay": None if self.report is None else self.report.to_body(),
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> RunMove:
        replay = body.get("replay")
        return cls(
            workflow_id=str(body["workflow_id"]),
            run_id=str(body["run_id"]),
            from_revision=body.get("from_revision"),
            to_revision=int(body["to_revision"]),
            report=None if replay is None else ReplayReport.from_body(replay),
        )


async def migrate_run(
    store: Store,
    workflow_id: str,
    *,
    to_revision: int,
    now: float,
    run_id: str | None = None,
    force: bool = False,
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> RunMove:
    """Move one open run to ``to_revision`` of its group, after replaying its history on
    that revision's source (skipped with ``force``).

    Raises:
        DeployRefusedError: its history does not replay there (nothing moves).
        RunNotFoundError, WorkflowNotRunningError, GroupNotFoundError, GroupError:
            as :meth:`Store.migrate_run`.
    """
    if isinstance(to_revision, bool) or not isinstance(to_revision, int) or to_revision < 1:
        raise GroupError(f"a revision is a number from 1, not {to_revision!r}")
    run = await store.get_run(run_id) if run_id else await store.find_run(workflow_id)
    if run is None or run.workflow_id != workflow_id:
        raise RunNotFoundError(f"no run with workflow id {workflow_id!r}")
    report, expect = None, None
    group = next((g for g in await store.list_groups() if g.task_queue == run.task_queue), None)
    found = await store.get_revision(group.name, to_revision) if group is not None else None
    if not force and found is not None and run.status in ("running", "blocked"):
        spec = GroupRevision.from_json(found.spec)
        mine = [r for r in await store.open_runs_on(run.task_queue) if r.run_id == run.run_id]
        report = await check_runs(
            store, mine, source=spec.source, filename=spec.filename, time_limit=time_limit
        )
        if report.failures:
            raise refusal(report)
        if report.out_of_time:
            raise GroupError(
                f"run {run.run_id} could not be checked within {time_limit:g}s; "
                "raise the time limit, or migrate with force"
            )
        expect = report.checked[0].next_seq if report.checked else None
    moved = await store.migrate_run(
        workflow_id, run.run_id, to_revision=to_revision, now=now, expect_seq=expect
    )
    return RunMove(
        workflow_id=moved.workflow_id,
        run_id=moved.run_id,
        from_revision=run.group_revision,
        to_revision=to_revision,
        report=report,
    )
