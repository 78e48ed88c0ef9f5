-- Versioned volumes (agent memory): volumes, refs, versions and the
-- content-addressed objects they are made of. The same tables as SQLite's
-- 0005 (see the notes there); BLOB is BYTEA here.
--
-- Concurrency: a commit moves a ref's head with a compare-and-set
-- (`UPDATE ... WHERE head IS NOT DISTINCT FROM ?`) and allocates its version
-- number from `volumes.next_version` (a row lock held to commit), so two
-- writers on one volume take turns and neither update is lost. Objects are
-- content-addressed: two writers inserting the same object meet on its
-- primary key, and the loser's transaction is run again and finds it.
-- Lock order: a task completion has locked its run's row before these.

CREATE TABLE volumes (
    name          TEXT PRIMARY KEY,
    created_at    DOUBLE PRECISION NOT NULL,
    next_version  BIGINT           NOT NULL DEFAULT 1
);

CREATE TABLE volume_refs (
    volume        TEXT             NOT NULL,
    name          TEXT             NOT NULL,
    head          BIGINT,
    base_ref      TEXT,
    base_version  BIGINT,
    created_at    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (volume, name)
);

CREATE TABLE volume_versions (
    volume      TEXT             NOT NULL,
    id          BIGINT           NOT NULL,
    parent_id   BIGINT,
    ref         TEXT             NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    message     TEXT             NOT NULL,
    manifest    BYTEA            NOT NULL,  -- the manifest object, or (chunked) its chunk list
    chunked     INTEGER          NOT NULL,
    paths       TEXT             NOT NULL,  -- JSON list of the paths it changed
    run_id      TEXT,
    step        BIGINT,
    attempt     INTEGER,
    PRIMARY KEY (volume, id)
);
CREATE INDEX volume_versions_by_ref ON volume_versions (volume, ref, id);
CREATE INDEX volume_versions_by_run ON volume_versions (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE volume_objects (
    key    BYTEA   PRIMARY KEY,
    base   BYTEA,
    depth  INTEGER NOT NULL,
    codec  INTEGER NOT NULL,
    size   BIGINT  NOT NULL,
    data   BYTEA   NOT NULL
);
