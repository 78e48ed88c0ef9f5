-- API tokens (only the SHA-256 of each secret is stored) and the cumulative
-- step metrics that /metrics serves.
--
-- The metrics are kept by triggers on history, so every writer (any worker,
-- any server) counts, inside the transaction that appends the event, and a
-- scrape is a read of a few rows rather than a scan of the history.

CREATE TABLE tokens (
    token_id     TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('user', 'service')),
    permissions  TEXT NOT NULL,
    secret_hash  TEXT NOT NULL,
    created_at   REAL NOT NULL,
    created_by   TEXT NOT NULL,
    revoked_at   REAL
);

-- Step latency: one row per histogram bucket (upper bound `le`, cumulative).
CREATE TABLE metric_step_buckets (
    le    REAL PRIMARY KEY,
    hits  INTEGER NOT NULL DEFAULT 0
);
INSERT INTO metric_step_buckets (le) VALUES
    (0.005), (0.01), (0.025), (0.05), (0.1), (0.25), (0.5), (1.0), (2.5), (5.0), (10.0),
    (30.0), (60.0), (300.0), (900.0), (3600.0);

CREATE TABLE metric_totals (
    name   TEXT PRIMARY KEY,
    count  INTEGER NOT NULL DEFAULT 0,
    total  REAL    NOT NULL DEFAULT 0
);
INSERT INTO metric_totals (name) VALUES ('step_seconds'), ('lease_expiries');

CREATE TRIGGER metric_step_completed AFTER INSERT ON history
WHEN NEW.type = 'TaskCompleted' AND json_extract(NEW.body, '$.started_at') IS NOT NULL
BEGIN
    UPDATE metric_step_buckets SET hits = hits + 1
        WHERE le >= MAX(0.0, NEW.at - json_extract(NEW.body, '$.started_at'));
    UPDATE metric_totals
        SET count = count + 1,
            total = total + MAX(0.0, NEW.at - json_extract(NEW.body, '$.started_at'))
        WHERE name = 'step_seconds';
END;

CREATE TRIGGER metric_lease_expired AFTER INSERT ON history
WHEN NEW.type = 'TaskAttemptFailed' AND json_extract(NEW.body, '$.reason') = 'worker_lost'
BEGIN
    UPDATE metric_totals SET count = count + 1 WHERE name = 'lease_expiries';
END;
