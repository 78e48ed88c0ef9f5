-- Volume retention: Volume(..., keep_versions=N, keep_for="30d") records its
-- policy here; the sweep and `keepgoing volume gc` drop the versions it lets
-- go, and the objects no kept version reaches (_store/sql/volume_retention.py).
-- NULL: no limit of that kind.
CREATE TABLE volume_retention (
    volume         TEXT PRIMARY KEY,
    keep_versions  INTEGER,
    keep_for       REAL,
    updated_at     REAL NOT NULL
);

-- The gateway's usage ledger after retention: when a run's gateway_calls rows
-- are deleted they are folded first, in the same transaction, into one row per
-- UTC day, workflow, model and key (_store/sql/gateway_days.py); the usage
-- report's totals add the rows whose calls all fall in its range.
CREATE TABLE gateway_usage_days (
    day            TEXT    NOT NULL,
    workflow       TEXT    NOT NULL,  -- '' for a run without a workflow name
    model          TEXT    NOT NULL,
    key_id         TEXT    NOT NULL,
    calls          INTEGER NOT NULL,
    errors         INTEGER NOT NULL,
    refused        INTEGER NOT NULL,
    input_tokens   BIGINT  NOT NULL,
    output_tokens  BIGINT  NOT NULL,
    cost           REAL NOT NULL,
    latency_sum    REAL NOT NULL,
    latency_max    REAL NOT NULL,
    first_at       REAL NOT NULL,
    last_at        REAL NOT NULL,
    PRIMARY KEY (day, workflow, model, key_id)
);
CREATE INDEX gateway_usage_days_first ON gateway_usage_days (first_at);
