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
