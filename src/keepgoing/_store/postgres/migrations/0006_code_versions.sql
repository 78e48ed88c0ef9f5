-- The code each run has seen, so a blocked run can be retried when other code
-- serves it.
--
-- code_versions     every code version (hash of the workflow's source file)
--                   that activated the run, in order of first use (JSON list)
-- blocked_versions  the versions whose replay blocked the run (JSON list); a
--                   worker retries a blocked run when its version is not here
-- block_count       how many times the run was blocked (the retry backoff)
-- retry_blocked_at  when any worker serving the run retries it anyway
ALTER TABLE runs ADD COLUMN code_versions TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN blocked_versions TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN block_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN retry_blocked_at DOUBLE PRECISION;
CREATE INDEX runs_blocked ON runs (workflow_name) WHERE status = 'blocked';
