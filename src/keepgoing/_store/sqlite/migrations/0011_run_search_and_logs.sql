-- The runs list at scale, and logs per task attempt.
--
-- Keyset pages of runs, newest first, filtered by status or workflow name:
-- each index ends in created_at, and SQLite appends the rowid (the tie-break).
CREATE INDEX runs_status_created ON runs (status, created_at);
CREATE INDEX runs_name_created ON runs (workflow_name, created_at);
-- The live stream of runs reads what changed since an instant.
CREATE INDEX runs_updated ON runs (updated_at);

-- What one attempt printed (stdout, stderr, logging records), bounded and
-- redacted by the worker, written with the attempt's outcome.
CREATE TABLE attempt_logs (
    run_id     TEXT    NOT NULL,
    cmd        INTEGER NOT NULL,
    attempt    INTEGER NOT NULL,
    worker_id  TEXT    NOT NULL,
    at         REAL    NOT NULL,
    text       TEXT    NOT NULL,
    size       INTEGER NOT NULL,
    truncated  INTEGER NOT NULL,
    PRIMARY KEY (run_id, cmd, attempt)
) WITHOUT ROWID;
