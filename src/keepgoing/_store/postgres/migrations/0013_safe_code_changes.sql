-- Safe code changes: runs pinned to their group revision, patch markers, retirement.
--
-- A run stays on the group revision it started on (runs.group_revision, 0009):
-- only that revision's workers claim its activations and its tasks on the
-- group's own queue. A revision with no open run left below the current one is
-- retired (retired_at); its environment and replicas go.
ALTER TABLE group_revisions ADD COLUMN retired_at REAL;
-- A decision about one older revision's replicas (NULL: the group's current one).
ALTER TABLE group_decisions ADD COLUMN revision INTEGER;

-- The patches a run has passed (keepgoing.patched / deprecate_patch): one row per
-- change id, written with the PatchMarked event that records it.
CREATE TABLE run_patches (
    run_id     TEXT    NOT NULL,
    change_id  TEXT    NOT NULL,
    at         REAL    NOT NULL,
    PRIMARY KEY (run_id, change_id)
);

CREATE INDEX runs_open_by_revision ON runs (task_queue, group_revision)
    WHERE status IN ('running', 'blocked');

-- keepgoing_revision_work: keepgoing_queue_work (0008) per group revision, for
-- autoscalers that run one deployment per revision (KEDA, see docs/kubernetes.md).
-- A stable interface like that view: columns are only ever added to.
--
--   queue, revision   the task queue and the revision of the runs the work is for
--                     (NULL: a run from before its queue had a group, or a task on
--                     a per-task group's queue, which any revision of that group serves)
--   queued, running, delayed, next_due_at   as in keepgoing_queue_work
--   open_runs         runs not ended (blocked ones too: they keep their revision)
CREATE VIEW keepgoing_revision_work AS
WITH clock AS (
    SELECT CAST(EXTRACT(EPOCH FROM now()) AS DOUBLE PRECISION) AS now
), work AS (
    SELECT t.queue AS queue,
           CASE WHEN t.queue = r.task_queue THEN r.group_revision END AS revision,
           CASE WHEN t.status = 'pending' AND t.available_at <= c.now THEN 1 ELSE 0 END AS queued,
           CASE WHEN t.status = 'running' THEN 1 ELSE 0 END AS running,
           CASE WHEN t.status = 'pending' AND t.available_at > c.now THEN 1 ELSE 0 END AS delayed,
           CASE WHEN t.status = 'pending' AND t.available_at > c.now THEN t.available_at END
               AS next_due_at,
           0 AS open_runs
    FROM tasks t JOIN runs r ON r.run_id = t.run_id CROSS JOIN clock c
    WHERE t.status IN ('pending', 'running')
    UNION ALL
    SELECT r.task_queue,
           r.group_revision,
           CASE WHEN r.status = 'running' AND r.runnable = 1 AND r.lease_owner IS NULL
                THEN 1 ELSE 0 END,
           CASE WHEN r.status = 'running' AND r.lease_owner IS NOT NULL THEN 1 ELSE 0 END,
           0,
           NULL,
           1
    FROM runs r
    WHERE r.status IN ('running', 'blocked')
    UNION ALL
    SELECT r.task_queue,
           r.group_revision,
           CASE WHEN tm.fire_at <= c.now THEN 1 ELSE 0 END,
           0,
           0,
           CASE WHEN tm.fire_at > c.now THEN tm.fire_at END,
           0
    FROM timers tm JOIN runs r ON r.run_id = tm.run_id CROSS JOIN clock c
    WHERE tm.status = 'pending' AND r.status = 'running'
)
SELECT queue,
       revision,
       SUM(queued) AS queued,
       SUM(running) AS running,
       SUM(delayed) AS delayed,
       MIN(next_due_at) AS next_due_at,
       SUM(open_runs) AS open_runs
FROM work
GROUP BY queue, revision;
