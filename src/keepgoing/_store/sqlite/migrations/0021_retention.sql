-- Retention: ended runs past their policy are archived and deleted by the
-- services' sweep (_store/sql/retention.py).
--
-- Each workflow's own policy (@workflow(retention=...)), as the workers serving
-- it last said; NULL: the store's default ([retention] runs, KEEPGOING_RETENTION).
CREATE TABLE workflow_retention (
    name        TEXT PRIMARY KEY,
    retain_for  REAL,
    updated_at  REAL NOT NULL
);
-- The sweep reads ended runs oldest first.
CREATE INDEX runs_ended ON runs (ended_at) WHERE ended_at IS NOT NULL;
-- An event is deleted with the last run whose wait consumed it.
CREATE INDEX event_waits_event ON event_waits (event_id) WHERE event_id IS NOT NULL;
