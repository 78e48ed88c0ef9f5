-- API tokens (only the SHA-256 of each secret is stored) and the cumulative
-- step metrics that /metrics serves.
--
-- The metrics are kept by a trigger on history, so every writer (any worker,
-- any server) counts, inside the transaction that appends the event. Unlike
-- SQLite, PostgreSQL has many writers: one counter row would be locked by
-- every step's transaction until it commits, and would serialize every step
-- in the cluster. So the trigger adds to one of 64 shards, chosen by the
-- backend (a connection runs one transaction at a time, so two writers meet
-- on a shard only when their backend pids collide), and the views
-- `metric_step_buckets` and `metric_totals` sum the shards: the same names
-- and columns as on SQLite, so the queries that read them are shared.

CREATE TABLE tokens (
    token_id     TEXT PRIMARY KEY,
    name         TEXT             NOT NULL,
    kind         TEXT             NOT NULL CHECK (kind IN ('user', 'service')),
    permissions  TEXT             NOT NULL,
    secret_hash  TEXT             NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    created_by   TEXT             NOT NULL,
    revoked_at   DOUBLE PRECISION,
    rowid        BIGINT GENERATED ALWAYS AS IDENTITY
);

-- Step latency histogram: the upper bounds, and per shard the steps whose
-- duration fell in (previous bound, le] (`le` = 'Infinity' past the last),
-- with their total duration.
CREATE TABLE metric_step_bounds (
    le  DOUBLE PRECISION PRIMARY KEY
);
INSERT INTO metric_step_bounds (le) VALUES
    (0.005), (0.01), (0.025), (0.05), (0.1), (0.25), (0.5), (1.0), (2.5), (5.0), (10.0),
    (30.0), (60.0), (300.0), (900.0), (3600.0);

CREATE TABLE metric_step_counts (
    le     DOUBLE PRECISION NOT NULL,
    shard  INTEGER          NOT NULL,
    hits   BIGINT           NOT NULL,
    total  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (le, shard)
);

CREATE TABLE metric_lease_counts (
    shard  INTEGER PRIMARY KEY,
    count  BIGINT  NOT NULL
);

-- Every counter row exists from the start, so the trigger only ever updates
-- one (a HOT update: no index changes), never inserts.
INSERT INTO metric_step_counts (le, shard, hits, total)
    SELECT b.le, s.shard, 0, 0.0
    FROM (SELECT le FROM metric_step_bounds UNION ALL SELECT 'Infinity') AS b (le),
         generate_series(0, 63) AS s (shard);
INSERT INTO metric_lease_counts (shard, count) SELECT shard, 0 FROM generate_series(0, 63) AS shard;

-- Cumulative buckets, as Prometheus expects (and as SQLite stores them).
CREATE VIEW metric_step_buckets AS
    SELECT b.le,
           (SELECT COALESCE(SUM(c.hits), 0) FROM metric_step_counts c WHERE c.le <= b.le)::BIGINT
               AS hits
    FROM metric_step_bounds b;

CREATE VIEW metric_totals AS
    SELECT 'step_seconds'::TEXT AS name,
           COALESCE(SUM(hits), 0)::BIGINT AS count,
           COALESCE(SUM(total), 0)::DOUBLE PRECISION AS total
    FROM metric_step_counts
    UNION ALL
    SELECT 'lease_expiries', COALESCE(SUM(count), 0)::BIGINT, 0.0 FROM metric_lease_counts;

-- One update per completed step; the bucket is found without a query (the
-- bounds are the table above, repeated here as a constant).
CREATE FUNCTION keepgoing_count_history() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    took        DOUBLE PRECISION;
    bound       DOUBLE PRECISION := 'Infinity';
    edge        DOUBLE PRECISION;
    this_shard  INTEGER := pg_backend_pid() % 64;
BEGIN
    IF NEW.type = 'TaskCompleted' THEN
        took := (NEW.body::json ->> 'started_at')::DOUBLE PRECISION;
        IF took IS NOT NULL THEN
            took := GREATEST(0.0, NEW.at - took);
            FOREACH edge IN ARRAY ARRAY[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                                        10.0, 30.0, 60.0, 300.0, 900.0, 3600.0]::DOUBLE PRECISION[]
            LOOP
                IF took <= edge THEN
                    bound := edge;
                    EXIT;
                END IF;
            END LOOP;
            UPDATE metric_step_counts SET hits = hits + 1, total = total + took
                WHERE le = bound AND shard = this_shard;
        END IF;
    ELSIF NEW.type = 'TaskAttemptFailed' AND (NEW.body::json ->> 'reason') = 'worker_lost' THEN
        UPDATE metric_lease_counts SET count = count + 1 WHERE shard = this_shard;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER history_metrics AFTER INSERT ON history FOR EACH ROW
    WHEN (NEW.type IN ('TaskCompleted', 'TaskAttemptFailed'))
    EXECUTE FUNCTION keepgoing_count_history();
