-- The run claim (_store/sql/leases.py claim_activations) filters on the
-- workflow name and orders by runnable_since: this index matches it exactly
-- and holds only runnable runs, so a claim never walks the ended runs a store
-- keeps (the planner otherwise took runs_name_created and read every run of
-- the name).
CREATE INDEX runs_claimable ON runs (workflow_name, runnable_since)
    WHERE runnable = 1 AND status = 'running';

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
