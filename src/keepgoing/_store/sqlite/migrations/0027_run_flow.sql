-- Flow control of runs (issue 29): priorities, workflow concurrency limits and
-- singletons; the rules are in _store/sql/admission.py and singletons.py.
--
-- A run's priority (higher first); its tasks inherit it. Claims order by
-- runnable_since - priority * 60 (RUN_ORDER, TASK_ORDER): a point is a minute.
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
-- A limited run's slot: flow_limit open runs of its workflow per flow_key at once
-- (NULL: no limit). admitted = 0: the run is queued, waiting for a slot; an
-- admitted run holds its slot until it ends.
ALTER TABLE runs ADD COLUMN flow_key TEXT;
ALTER TABLE runs ADD COLUMN flow_limit INTEGER;
ALTER TABLE runs ADD COLUMN admitted INTEGER NOT NULL DEFAULT 1;
-- Each workflow's run-flow spec (_run_flow.RunFlow as JSON), as the workers
-- serving it last said: it holds for every start, by code or by name.
CREATE TABLE workflow_flow (
    name        TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,
    updated_at  REAL NOT NULL
);
-- The claims' order, exactly as RUN_ORDER and TASK_ORDER spell it (the run
-- claim's equalities lead, so SQLite's planner reads the claimable runs in order
-- instead of sorting the open ones: tests/unit/_store/test_claim_plans.py).
DROP INDEX runs_runnable;
CREATE INDEX runs_runnable ON runs (runnable, status, (runnable_since - priority * 60))
    WHERE runnable = 1 AND status = 'running';
DROP INDEX tasks_pending;
CREATE INDEX tasks_pending ON tasks ((available_at - priority * 60)) WHERE status = 'pending';
-- The slots of a workflow's key: its open limited runs.
CREATE INDEX runs_flow_slots ON runs (workflow_name, flow_key)
    WHERE flow_limit IS NOT NULL AND status IN ('running', 'blocked');
