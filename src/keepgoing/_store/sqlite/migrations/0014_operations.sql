-- Operations and review.
--
-- A step normally carries the operation id op-<run_id>-<cmd>. A step that a
-- reviewer sent back to run again carries the first step's operation id here,
-- so operation_id() and reconcile= see the same id on every round.
ALTER TABLE tasks ADD COLUMN operation_id TEXT;
-- Steps whose attempt raised UncertainOutcome (status 'uncertain') are the
-- review queue: a partial index keeps listing them cheap however many tasks ran.
CREATE INDEX tasks_uncertain ON tasks (run_id, cmd) WHERE status = 'uncertain';
