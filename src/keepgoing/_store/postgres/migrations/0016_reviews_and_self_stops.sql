-- Review decisions as one conditional write, and stops a task caused itself.
--
-- reviews: one row per uncertain round (the step that raised UncertainOutcome),
-- written by the review path in the transaction that sends the decision's
-- message: the primary key makes a round's decision happen once. abandoned_at
-- is set by the commit that records ReviewAbandoned (the workflow stopped
-- waiting for a decision); from then on decisions are refused, and a decision
-- recorded just before it is known to be unused.
CREATE TABLE reviews (
    run_id        TEXT NOT NULL,
    cmd           BIGINT NOT NULL,
    operation_id  TEXT NOT NULL,
    decision      TEXT,
    reason        TEXT NOT NULL DEFAULT '',
    actor_kind    TEXT NOT NULL DEFAULT '',
    actor_id      TEXT NOT NULL DEFAULT '',
    message_id    TEXT,
    decided_at    DOUBLE PRECISION,
    abandoned_at  DOUBLE PRECISION,
    PRIMARY KEY (run_id, cmd)
);
-- A stop traced to a task's own code (a signal from inside the attempt, a kill
-- request or a recorded stop from the worker's own process) names the attempt
-- it is traced to, when it is known: that attempt's loss counts against its
-- max_worker_losses, the worker's other attempts are handed back free.
ALTER TABLE worker_stops ADD COLUMN blame_run_id TEXT;
ALTER TABLE worker_stops ADD COLUMN blame_cmd BIGINT;
