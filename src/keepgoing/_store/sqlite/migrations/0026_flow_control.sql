-- Flow control (issue 29): a task's concurrency and rate limits, resolved when
-- its workflow scheduled it (_store/sql/limits.py). The claim admits an attempt
-- only while fewer than concurrency_cap attempts of the same (limit_name,
-- limit_key) run with an unexpired lease, and only with a token from its
-- bucket in limit_buckets. limit_key / rate_key: the key's canonical JSON, ''
-- for a limit without a key. NULL limit_name / rate_name: no limit of that kind.
ALTER TABLE tasks ADD COLUMN limit_name TEXT;
ALTER TABLE tasks ADD COLUMN limit_key TEXT;
ALTER TABLE tasks ADD COLUMN concurrency_cap INTEGER;
ALTER TABLE tasks ADD COLUMN rate_name TEXT;
ALTER TABLE tasks ADD COLUMN rate_key TEXT;
ALTER TABLE tasks ADD COLUMN rate_tokens INTEGER;
ALTER TABLE tasks ADD COLUMN rate_period REAL;
ALTER TABLE tasks ADD COLUMN rate_burst INTEGER;
CREATE INDEX tasks_limit_held ON tasks (limit_name, limit_key, lease_expires_at)
    WHERE status = 'running' AND limit_name IS NOT NULL;

-- One token bucket per rate limit and key: tokens as of updated_at; refilled
-- by the time elapsed since, up to the limit's burst, when next read.
CREATE TABLE limit_buckets (
    name        TEXT NOT NULL,
    key         TEXT NOT NULL,
    tokens      REAL NOT NULL,
    updated_at  REAL NOT NULL,
    PRIMARY KEY (name, key)
);

-- The limits workers declared at their start (named limits, and each limited
-- task's own), so the server can list them with their use.
CREATE TABLE limits (
    name             TEXT PRIMARY KEY,
    concurrency_cap  INTEGER,
    keyed            INTEGER NOT NULL DEFAULT 0,
    rate_tokens      INTEGER,
    rate_period      REAL,
    rate_burst       INTEGER,
    updated_at       REAL NOT NULL
);
