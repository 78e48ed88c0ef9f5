-- keepgoing on SQLite: runs, their append-only history, tasks with leases,
-- durable timers and the worker registry.
--
-- Lock order: SQLite has one writer; every write transaction is BEGIN
-- IMMEDIATE, so it holds the database write lock from its first statement
-- and no row-level ordering is needed.

CREATE TABLE runs (
    run_id            TEXT PRIMARY KEY,
    workflow_id       TEXT    NOT NULL,
    workflow_name     TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    input             TEXT    NOT NULL,
    task_queue        TEXT    NOT NULL,
    code_version      TEXT    NOT NULL,
    created_at        REAL    NOT NULL,
    updated_at        REAL    NOT NULL,
    ended_at          REAL,
    result            TEXT,
    error             TEXT,
    blocked_reason    TEXT,
    fence             INTEGER NOT NULL DEFAULT 0,
    next_seq          INTEGER NOT NULL DEFAULT 1,
    last_input_seq    INTEGER NOT NULL DEFAULT 0,
    runnable          INTEGER NOT NULL DEFAULT 0,
    runnable_since    REAL,
    lease_owner       TEXT,
    lease_expires_at  REAL
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

CREATE TABLE history (
    run_id  TEXT    NOT NULL,
    seq     INTEGER NOT NULL,
    type    TEXT    NOT NULL,
    at      REAL    NOT NULL,
    body    TEXT    NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE tasks (
    run_id             TEXT    NOT NULL,
    cmd                INTEGER NOT NULL,
    workflow_id        TEXT    NOT NULL,
    name               TEXT    NOT NULL,
    queue              TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    args               TEXT    NOT NULL,
    kwargs             TEXT    NOT NULL,
    image              TEXT,
    retries            INTEGER NOT NULL,
    retry_delay        REAL,
    timeout            REAL    NOT NULL,
    max_worker_losses  INTEGER NOT NULL,
    attempt            INTEGER NOT NULL DEFAULT 0,
    failures           INTEGER NOT NULL DEFAULT 0,
    worker_losses      INTEGER NOT NULL DEFAULT 0,
    fence              INTEGER NOT NULL DEFAULT 0,
    available_at       REAL    NOT NULL,
    started_at         REAL,
    deadline           REAL,
    lease_owner        TEXT,
    lease_expires_at   REAL,
    PRIMARY KEY (run_id, cmd)
) WITHOUT ROWID;
CREATE INDEX tasks_pending ON tasks (available_at) WHERE status = 'pending';
CREATE INDEX tasks_leases ON tasks (lease_expires_at) WHERE status = 'running';
CREATE INDEX tasks_owner ON tasks (lease_owner) WHERE status = 'running';

CREATE TABLE timers (
    run_id   TEXT    NOT NULL,
    cmd      INTEGER NOT NULL,
    fire_at  REAL    NOT NULL,
    status   TEXT    NOT NULL,
    PRIMARY KEY (run_id, cmd)
) WITHOUT ROWID;
CREATE INDEX timers_due ON timers (fire_at) WHERE status = 'pending';

CREATE TABLE workers (
    worker_id     TEXT PRIMARY KEY,
    queues        TEXT NOT NULL,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    REAL NOT NULL,
    heartbeat_at  REAL NOT NULL,
    info          TEXT NOT NULL
);
