-- Scale-to-zero worker groups: each deploy adds a revision; the autoscaler keeps
-- the desired replicas, its decisions, the instances it started and a lease row
-- so only one autoscaler acts at a time. Secrets are stored encrypted (Fernet).
CREATE TABLE worker_groups (
    name              TEXT PRIMARY KEY,
    task_queue        TEXT    NOT NULL,
    backend           TEXT    NOT NULL,
    parent            TEXT,
    revision          INTEGER NOT NULL,
    replicas          INTEGER NOT NULL DEFAULT 0,
    cold_start        DOUBLE PRECISION,
    created_at        DOUBLE PRECISION    NOT NULL,
    updated_at        DOUBLE PRECISION    NOT NULL
);
CREATE UNIQUE INDEX worker_groups_queue ON worker_groups (task_queue);

CREATE TABLE group_revisions (
    group_name  TEXT    NOT NULL,
    revision    INTEGER NOT NULL,
    spec        TEXT    NOT NULL,
    created_at  DOUBLE PRECISION    NOT NULL,
    PRIMARY KEY (group_name, revision)
);

CREATE TABLE group_decisions (
    id             BIGSERIAL PRIMARY KEY,
    group_name     TEXT    NOT NULL,
    at             DOUBLE PRECISION    NOT NULL,
    from_replicas  INTEGER NOT NULL,
    to_replicas    INTEGER NOT NULL,
    reason         TEXT    NOT NULL,
    queued         INTEGER NOT NULL,
    running        INTEGER NOT NULL
);
CREATE INDEX group_decisions_group ON group_decisions (group_name, id);

CREATE TABLE group_instances (
    instance_id  TEXT    NOT NULL,
    group_name   TEXT    NOT NULL,
    revision     INTEGER NOT NULL,
    state        TEXT    NOT NULL,
    pid          INTEGER,
    host         TEXT    NOT NULL,
    started_at   DOUBLE PRECISION    NOT NULL,
    ended_at     DOUBLE PRECISION,
    exit_status  INTEGER,
    PRIMARY KEY (group_name, instance_id)
);

CREATE TABLE secrets (
    scope       TEXT NOT NULL,
    name        TEXT NOT NULL,
    ciphertext  TEXT NOT NULL,
    updated_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (scope, name)
);

CREATE TABLE service_leases (
    name        TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL
);

-- The group revision a run started on (NULL: its queue has no group).
ALTER TABLE runs ADD COLUMN group_revision INTEGER;
