-- keepgoing on PostgreSQL: runs, their append-only history, tasks with leases,
-- durable timers and the worker registry. The tables mirror the SQLite
-- migrations of the same number; the queries are shared (see
-- keepgoing/_store/_dialect.py), so a column added there is added here too.
--
-- Types: REAL is DOUBLE PRECISION here (PostgreSQL's REAL is 4 bytes), and
-- `rowid` is an identity column standing in for SQLite's implicit rowid
-- (insertion order, used to break ties between equal timestamps).
--
-- Lock order (many writers, READ COMMITTED; written down in full in
-- keepgoing/_store/_dialect.py and docs/deploy.md):
--   1. the `runs` row of the run being written (SELECT ... FOR UPDATE);
--   2. that run's `tasks`, `timers` and `event_waits` rows;
--   3. other runs the transaction touches (child, parent, message target);
--   4. metric counters last (see 0004).
-- Sweeps (claims, due timers, expired leases) take rows with SKIP LOCKED and
-- never wait for a lock, so they cannot close a cycle.

CREATE TABLE runs (
    run_id            TEXT PRIMARY KEY,
    workflow_id       TEXT             NOT NULL,
    workflow_name     TEXT             NOT NULL,
    status            TEXT             NOT NULL,
    input             TEXT             NOT NULL,
    task_queue        TEXT             NOT NULL,
    code_version      TEXT             NOT NULL,
    created_at        DOUBLE PRECISION NOT NULL,
    updated_at        DOUBLE PRECISION NOT NULL,
    ended_at          DOUBLE PRECISION,
    result            TEXT,
    error             TEXT,
    blocked_reason    TEXT,
    fence             BIGINT           NOT NULL DEFAULT 0,
    next_seq          BIGINT           NOT NULL DEFAULT 1,
    last_input_seq    BIGINT           NOT NULL DEFAULT 0,
    runnable          INTEGER          NOT NULL DEFAULT 0,
    runnable_since    DOUBLE PRECISION,
    lease_owner       TEXT,
    lease_expires_at  DOUBLE PRECISION,
    rowid             BIGINT GENERATED ALWAYS AS IDENTITY
);
-- At most one run per workflow id that has not ended.
CREATE UNIQUE INDEX runs_open_workflow_id ON runs (workflow_id)
    WHERE status IN ('running', 'blocked');
CREATE INDEX runs_runnable ON runs (runnable_since)
    WHERE runnable = 1 AND status = 'running';
CREATE INDEX runs_workflow_id ON runs (workflow_id, created_at);
CREATE INDEX runs_created ON runs (created_at);
CREATE INDEX runs_activation_leases ON runs (lease_expires_at)
    WHERE lease_owner IS NOT NULL;
CREATE INDEX runs_lease_owner ON runs (lease_owner)
    WHERE lease_owner IS NOT NULL;

CREATE TABLE history (
    run_id  TEXT             NOT NULL,
    seq     BIGINT           NOT NULL,
    type    TEXT             NOT NULL,
    at      DOUBLE PRECISION NOT NULL,
    body    TEXT             NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE tasks (
    run_id             TEXT             NOT NULL,
    cmd                BIGINT           NOT NULL,
    workflow_id        TEXT             NOT NULL,
    name               TEXT             NOT NULL,
    queue              TEXT             NOT NULL,
    status             TEXT             NOT NULL,
    args               TEXT             NOT NULL,
    kwargs             TEXT             NOT NULL,
    image              TEXT,
    retries            INTEGER          NOT NULL,
    retry_delay        DOUBLE PRECISION,
    timeout            DOUBLE PRECISION NOT NULL,
    max_worker_losses  INTEGER          NOT NULL,
    attempt            INTEGER          NOT NULL DEFAULT 0,
    failures           INTEGER          NOT NULL DEFAULT 0,
    worker_losses      INTEGER          NOT NULL DEFAULT 0,
    fence              BIGINT           NOT NULL DEFAULT 0,
    available_at       DOUBLE PRECISION NOT NULL,
    started_at         DOUBLE PRECISION,
    deadline           DOUBLE PRECISION,
    lease_owner        TEXT,
    lease_expires_at   DOUBLE PRECISION,
    PRIMARY KEY (run_id, cmd)
);
CREATE INDEX tasks_pending ON tasks (available_at) WHERE status = 'pending';
CREATE INDEX tasks_leases ON tasks (lease_expires_at) WHERE status = 'running';
CREATE INDEX tasks_owner ON tasks (lease_owner) WHERE status = 'running';

CREATE TABLE timers (
    run_id   TEXT             NOT NULL,
    cmd      BIGINT           NOT NULL,
    fire_at  DOUBLE PRECISION NOT NULL,
    status   TEXT             NOT NULL,
    PRIMARY KEY (run_id, cmd)
);
CREATE INDEX timers_due ON timers (fire_at) WHERE status = 'pending';

CREATE TABLE workers (
    worker_id     TEXT PRIMARY KEY,
    queues        TEXT             NOT NULL,
    host          TEXT             NOT NULL,
    pid           INTEGER          NOT NULL,
    started_at    DOUBLE PRECISION NOT NULL,
    heartbeat_at  DOUBLE PRECISION NOT NULL,
    info          TEXT             NOT NULL
);
