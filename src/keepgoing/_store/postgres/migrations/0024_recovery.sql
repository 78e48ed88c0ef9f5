-- Recovery controls: the progress a run publishes.
--
-- keepgoing.set_status(name, value) records a StatusSet event with the
-- activation's commands; the same commit keeps the newest value of each name
-- here, so Client.get_status and the run page read one row, not the history.
CREATE TABLE run_status (
    run_id  TEXT    NOT NULL,
    name    TEXT    NOT NULL,
    value   TEXT    NOT NULL,
    at      REAL    NOT NULL,
    PRIMARY KEY (run_id, name)
);

-- Where a resumed or forked run came from: the run whose history prefix it
-- reuses (copied by the store in the transaction that starts it), how
-- ('resume' or 'fork'), and the step it runs again from.
ALTER TABLE runs ADD COLUMN origin_run_id TEXT;
ALTER TABLE runs ADD COLUMN origin_kind TEXT;
ALTER TABLE runs ADD COLUMN origin_step INTEGER;
CREATE INDEX runs_origin ON runs (origin_run_id) WHERE origin_run_id IS NOT NULL;
