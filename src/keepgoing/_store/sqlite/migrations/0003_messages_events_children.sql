-- Messages travel as history events (MessageReceived); this migration adds
-- lineage and continue-as-new links on runs, external events with their waits,
-- and the audit log.

ALTER TABLE runs ADD COLUMN parent_workflow_id TEXT;
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN parent_cmd INTEGER;
ALTER TABLE runs ADD COLUMN continued_from TEXT;
ALTER TABLE runs ADD COLUMN continued_to TEXT;
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

-- External events, de-duplicated by event_id, kept until matched and beyond.
CREATE TABLE events (
    event_id        TEXT PRIMARY KEY,
    event_type      TEXT NOT NULL,
    correlation_id  TEXT NOT NULL,
    payload         TEXT NOT NULL,
    published_at    REAL NOT NULL,
    actor_kind      TEXT NOT NULL,
    actor_id        TEXT NOT NULL,
    position        INTEGER NOT NULL
);
CREATE INDEX events_by_key ON events (event_type, correlation_id, position);

-- One row per wait_for_event: waiting until an event matches it.
CREATE TABLE event_waits (
    run_id          TEXT    NOT NULL,
    cmd             INTEGER NOT NULL,
    event_type      TEXT    NOT NULL,
    correlation_id  TEXT    NOT NULL,
    deadline        REAL,
    status          TEXT    NOT NULL,
    event_id        TEXT,
    PRIMARY KEY (run_id, cmd)
) WITHOUT ROWID;
CREATE INDEX event_waits_waiting ON event_waits (event_type, correlation_id)
    WHERE status = 'waiting';

CREATE TABLE audit_log (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           REAL NOT NULL,
    actor_kind   TEXT NOT NULL,
    actor_id     TEXT NOT NULL,
    action       TEXT NOT NULL,
    workflow_id  TEXT,
    run_id       TEXT,
    detail       TEXT NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);
