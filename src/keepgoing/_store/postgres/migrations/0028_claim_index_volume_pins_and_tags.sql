-- The run claim reads the partial index runs_runnable (migration 0027), which
-- holds only runnable runs in claim order, so a store that keeps many ended
-- runs claims as fast as an empty one (tests/unit/_store/test_claim_plans.py).

-- Volume read pins: each version a run read, recorded in the transaction of
-- the read; a version an open run read is never dropped by volume retention
-- (_store/sql/volume_retention.py). A run's pins go with its deletion.
CREATE TABLE volume_reads (
    run_id      TEXT    NOT NULL,
    volume      TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    read_at     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, volume, version)
);
CREATE INDEX volume_reads_version ON volume_reads (volume, version);

-- Volume tags: a name for one version of a volume (Volume.tag); a tagged
-- version is never dropped.
CREATE TABLE volume_tags (
    volume      TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (volume, name)
);
CREATE INDEX volume_tags_version ON volume_tags (volume, version);
