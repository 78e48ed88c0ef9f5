-- Trouble markers on runs, and lost workers.
--
-- Each run keeps counters of what went wrong, written by the statement that
-- appends the events they count (_store/trouble.py): attempts lost with their
-- worker, attempts retried after an error or a timeout, attempts refused for a
-- rate limit, and the steps whose workflow waits for a review decision now.
-- The runs list shows and filters them without reading any history; each
-- filter is a partial index in (created_at, rowid) order.
ALTER TABLE runs ADD COLUMN worker_losses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN rate_limited INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN reviews_waiting INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_worker_lost ON runs (created_at, rowid) WHERE worker_losses > 0;
CREATE INDEX runs_retried ON runs (created_at, rowid) WHERE retries > 0;
CREATE INDEX runs_rate_limited ON runs (created_at, rowid) WHERE rate_limited > 0;
CREATE INDEX runs_waiting_review ON runs (created_at, rowid)
    WHERE reviews_waiting > 0 AND status = 'running';
-- Per operation (its first step's row): review waits started minus review
-- messages received; above zero, the workflow waits for a decision on it.
ALTER TABLE tasks ADD COLUMN review_waits INTEGER NOT NULL DEFAULT 0;

-- Runs recorded before this migration: their counters from their histories,
-- once. The rate-limit test is the rule of _store/trouble.py as LIKE patterns.
UPDATE runs SET worker_losses = f.losses, retries = f.retried, rate_limited = f.limited
FROM (
    SELECT run_id,
        COUNT(*) FILTER (WHERE reason = 'worker_lost') AS losses,
        COUNT(*) FILTER (WHERE reason IN ('error', 'timeout') AND retry_at IS NOT NULL)
            AS retried,
        COUNT(*) FILTER (WHERE reason IN ('error', 'timeout')
            AND (said LIKE '%429%' OR said LIKE '%ratelimit%' OR said LIKE '%rate limit%'
                OR said LIKE '%rate-limit%' OR said LIKE '%too many requests%')) AS limited
    FROM (
        SELECT run_id, body::jsonb ->> 'reason' AS reason,
            body::jsonb ->> 'retry_at' AS retry_at,
            LOWER(COALESCE(body::jsonb #>> '{error,type}', '') || ' '
                || COALESCE(body::jsonb #>> '{error,message}', '')) AS said
        FROM history WHERE type = 'TaskAttemptFailed'
    ) AS attempts
    GROUP BY run_id
) AS f
WHERE runs.run_id = f.run_id;
UPDATE tasks SET review_waits = w.balance
FROM (
    SELECT h.run_id, h.body::jsonb ->> 'name' AS name,
        SUM(CASE h.type WHEN 'MessageWaitStarted' THEN 1 ELSE -1 END) AS balance
    FROM history h JOIN runs r ON r.run_id = h.run_id
    WHERE r.status = 'running' AND h.type IN ('MessageWaitStarted', 'MessageReceived')
        AND h.body::jsonb ->> 'name' LIKE 'review:op-%'
    GROUP BY h.run_id, h.body::jsonb ->> 'name'
) AS w
WHERE tasks.run_id = w.run_id AND w.name = 'review:op-' || tasks.run_id || '-' || tasks.cmd;
UPDATE runs SET reviews_waiting = (
    SELECT COUNT(*) FROM tasks t WHERE t.run_id = runs.run_id AND t.review_waits > 0
) WHERE status = 'running';

-- A worker whose process ended, or whose heartbeat stopped past its deadline,
-- is marked lost (when, and why in words) by the services' sweep: the live
-- list, queue counts and the API leave it out. Its row stays a while, so the
-- workers page can say what happened to it.
ALTER TABLE workers ADD COLUMN lost_at DOUBLE PRECISION;
ALTER TABLE workers ADD COLUMN lost_reason TEXT;
