-- Workflow names that workers have served, so a client that starts a run by
-- name can refuse a name no worker has ever known.
CREATE TABLE workflow_catalog (
    name        TEXT NOT NULL,
    queue       TEXT NOT NULL,
    last_seen   REAL NOT NULL,
    PRIMARY KEY (name, queue)
) WITHOUT ROWID;
