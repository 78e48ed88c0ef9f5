-- Versioned volumes (agent memory): volumes, refs, versions and the
-- content-addressed objects they are made of.
--
-- An object is addressed by the SHA-256 of its plain bytes: a chunk of a
-- file or of a manifest, or a large manifest's chunk list. It is stored
-- zlib-compressed, either alone (codec 1; codec 0 is raw) or as a delta
-- against a `base` object (codec 2: the base's bytes are zlib's preset
-- dictionary). `depth` is the length of that base chain, capped so a read
-- decompresses a bounded number of objects. Objects are shared by every
-- version and every volume and are never deleted, nor are versions.
--
-- A commit runs in one BEGIN IMMEDIATE transaction: it reads the ref's
-- head, writes the new objects, allocates the version number and moves the
-- head with a compare-and-set (`UPDATE ... WHERE head IS ?`).

CREATE TABLE volumes (
    name          TEXT PRIMARY KEY,
    created_at    REAL    NOT NULL,
    next_version  INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE volume_refs (
    volume        TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    head          INTEGER,
    base_ref      TEXT,
    base_version  INTEGER,
    created_at    REAL    NOT NULL,
    PRIMARY KEY (volume, name)
) WITHOUT ROWID;

CREATE TABLE volume_versions (
    volume      TEXT    NOT NULL,
    id          INTEGER NOT NULL,
    parent_id   INTEGER,
    ref         TEXT    NOT NULL,
    created_at  REAL    NOT NULL,
    message     TEXT    NOT NULL,
    manifest    BLOB    NOT NULL,  -- the manifest object, or (chunked) its chunk list
    chunked     INTEGER NOT NULL,
    paths       TEXT    NOT NULL,  -- JSON list of the paths it changed
    run_id      TEXT,
    step        INTEGER,
    attempt     INTEGER,
    PRIMARY KEY (volume, id)
) WITHOUT ROWID;
CREATE INDEX volume_versions_by_ref ON volume_versions (volume, ref, id);
CREATE INDEX volume_versions_by_run ON volume_versions (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE volume_objects (
    key    BLOB    PRIMARY KEY,
    base   BLOB,
    depth  INTEGER NOT NULL,
    codec  INTEGER NOT NULL,
    size   INTEGER NOT NULL,
    data   BLOB    NOT NULL
);
