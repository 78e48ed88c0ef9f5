-- The runs list at scale, and logs per task attempt.
--
-- Keyset pages of runs, newest first (created_at, then rowid), filtered by
-- status or workflow name.
CREATE INDEX runs_created_rowid ON runs (created_at, rowid);
CREATE INDEX runs_status_created ON runs (status, created_at, rowid);
CREATE INDEX runs_name_created ON runs (workflow_name, created_at, rowid);
-- An id prefix is a range in byte order, whatever the database's collation.
CREATE INDEX runs_workflow_id_bytes ON runs (workflow_id COLLATE "C");
CREATE INDEX runs_run_id_bytes ON runs (run_id COLLATE "C");
-- The live stream of runs reads what changed since an instant.
CREATE INDEX runs_updated ON runs (updated_at);

-- What one attempt printed (stdout, stderr, logging records), bounded and
-- redacted by the worker, written with the attempt's outcome.
CREATE TABLE attempt_logs (
    run_id     TEXT             NOT NULL,
    cmd        INTEGER          NOT NULL,
    attempt    INTEGER          NOT NULL,
    worker_id  TEXT             NOT NULL,
    at         DOUBLE PRECISION NOT NULL,
    text       TEXT             NOT NULL,
    size       BIGINT           NOT NULL,
    truncated  INTEGER          NOT NULL,
    PRIMARY KEY (run_id, cmd, attempt)
);
