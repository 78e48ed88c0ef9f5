-- Schedules: each row holds its spec (JSON, read by _schedule_spec.py) and its
-- cursor, the next slot to act on and when it is due (the slot plus its
-- jitter). Firing moves the cursor with a compare-and-set in the transaction
-- that records each slot's action and starts its run, so one server acts per
-- slot; an action's key (schedule_id, slot_at) keeps one action per slot.
CREATE TABLE schedules (
    schedule_id     TEXT PRIMARY KEY,
    workflow_name   TEXT    NOT NULL,
    input           TEXT    NOT NULL,
    task_queue      TEXT    NOT NULL,
    spec            TEXT    NOT NULL,
    overlap         TEXT    NOT NULL,
    catchup_window  DOUBLE PRECISION    NOT NULL,
    paused          INTEGER NOT NULL DEFAULT 0,
    note            TEXT,
    source          TEXT    NOT NULL DEFAULT 'api',
    created_at      DOUBLE PRECISION    NOT NULL,
    updated_at      DOUBLE PRECISION    NOT NULL,
    next_slot_at    DOUBLE PRECISION,
    next_due_at     DOUBLE PRECISION
);
CREATE INDEX schedules_due ON schedules (next_due_at) WHERE paused = 0;

-- What a schedule did for each slot: started (run_id), skipped (reason),
-- buffered (waiting for the open run to end) or failed (reason).
CREATE TABLE schedule_actions (
    schedule_id  TEXT    NOT NULL,
    slot_at      DOUBLE PRECISION    NOT NULL,
    kind         TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    workflow_id  TEXT    NOT NULL,
    run_id       TEXT,
    reason       TEXT,
    created_at   DOUBLE PRECISION    NOT NULL,
    started_at   DOUBLE PRECISION,
    PRIMARY KEY (schedule_id, slot_at)
);
CREATE INDEX schedule_actions_run ON schedule_actions (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX schedule_actions_buffered ON schedule_actions (schedule_id, slot_at)
    WHERE status = 'buffered';
