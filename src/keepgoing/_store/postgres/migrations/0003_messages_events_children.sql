-- Messages travel as history events (MessageReceived); this migration adds
-- lineage and continue-as-new links on runs, external events with their waits,
-- and the audit log.

ALTER TABLE runs ADD COLUMN parent_workflow_id TEXT;
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN parent_cmd BIGINT;
ALTER TABLE runs ADD COLUMN continued_from TEXT;
ALTER TABLE runs ADD COLUMN continued_to TEXT;
CREATE INDEX runs_parent ON runs (parent_run_id) WHERE parent_run_id IS NOT NULL;

-- External events, de-duplicated by event_id, kept until matched and beyond.
-- Publishing and starting a wait on one (event_type, correlation_id) are
-- serialized by a transaction-scoped advisory lock on that pair, so an event
-- and a wait that commit at the same instant still meet.
CREATE TABLE events (
    event_id        TEXT PRIMARY KEY,
    event_type      TEXT             NOT NULL,
    correlation_id  TEXT             NOT NULL,
    payload         TEXT             NOT NULL,
    published_at    DOUBLE PRECISION NOT NULL,
    actor_kind      TEXT             NOT NULL,
    actor_id        TEXT             NOT NULL,
    position        BIGINT           NOT NULL
);
CREATE INDEX events_by_key ON events (event_type, correlation_id, position);
-- MAX(position) + 1 is read on every publish: an index keeps it a lookup.
CREATE INDEX events_position ON events (position);

-- One row per wait_for_event: waiting until an event matches it.
CREATE TABLE event_waits (
    run_id          TEXT             NOT NULL,
    cmd             BIGINT           NOT NULL,
    event_type      TEXT             NOT NULL,
    correlation_id  TEXT             NOT NULL,
    deadline        DOUBLE PRECISION,
    status          TEXT             NOT NULL,
    event_id        TEXT,
    PRIMARY KEY (run_id, cmd)
);
CREATE INDEX event_waits_waiting ON event_waits (event_type, correlation_id)
    WHERE status = 'waiting';

CREATE TABLE audit_log (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           DOUBLE PRECISION NOT NULL,
    actor_kind   TEXT             NOT NULL,
    actor_id     TEXT             NOT NULL,
    action       TEXT             NOT NULL,
    workflow_id  TEXT,
    run_id       TEXT,
    detail       TEXT             NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);
