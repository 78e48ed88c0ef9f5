-- keepgoing_queue_work: the work each task queue has for its workers, one row
-- per queue that has any. It is a stable interface: autoscalers outside
-- keepgoing (KEDA's postgresql trigger, see docs/kubernetes.md) query it, so
-- its columns are only ever added to, never renamed or removed.
--
--   queue        the task queue (a worker group serves `workflows.<group>`)
--   queued       work a worker would claim now: pending task attempts whose
--                retry delay has passed, runnable activations nobody holds,
--                and due timers not yet fired (a worker fires them)
--   running      work a worker holds: running task attempts and leased
--                activations (an expired lease counts until it is reaped,
--                because taking it back needs a worker too)
--   delayed      task attempts waiting out a retry delay
--   next_due_at  the earliest future timer or retry (UNIX seconds), or NULL
--   open_runs    runs not ended on the queue, waiting or not
--
-- A run waiting on a timer, a message, an event or a child is in neither
-- `queued` nor `running`: it needs no worker until its input arrives. A
-- blocked run is not counted either (it waits for other code, not a worker).
-- "Now" is the database's clock, the one KEDA's query runs against.
CREATE VIEW keepgoing_queue_work AS
WITH clock AS (
    SELECT CAST(EXTRACT(EPOCH FROM now()) AS DOUBLE PRECISION) AS now
), work AS (
    SELECT t.queue AS queue,
           CASE WHEN t.status = 'pending' AND t.available_at <= c.now THEN 1 ELSE 0 END AS queued,
           CASE WHEN t.status = 'running' THEN 1 ELSE 0 END AS running,
           CASE WHEN t.status = 'pending' AND t.available_at > c.now THEN 1 ELSE 0 END AS delayed,
           CASE WHEN t.status = 'pending' AND t.available_at > c.now THEN t.available_at END
               AS next_due_at,
           0 AS open_runs
    FROM tasks t CROSS JOIN clock c
    WHERE t.status IN ('pending', 'running')
    UNION ALL
    SELECT r.task_queue,
           CASE WHEN r.runnable = 1 AND r.lease_owner IS NULL THEN 1 ELSE 0 END,
           CASE WHEN r.lease_owner IS NOT NULL THEN 1 ELSE 0 END,
           0,
           NULL,
           1
    FROM runs r
    WHERE r.status = 'running'
    UNION ALL
    SELECT r.task_queue,
           CASE WHEN tm.fire_at <= c.now THEN 1 ELSE 0 END,
           0,
           0,
           CASE WHEN tm.fire_at > c.now THEN tm.fire_at END,
           0
    FROM timers tm JOIN runs r ON r.run_id = tm.run_id CROSS JOIN clock c
    WHERE tm.status = 'pending' AND r.status = 'running'
)
SELECT queue,
       SUM(queued) AS queued,
       SUM(running) AS running,
       SUM(delayed) AS delayed,
       MIN(next_due_at) AS next_due_at,
       SUM(open_runs) AS open_runs
FROM work
GROUP BY queue;

-- KEDA runs the view's query for one queue every few seconds: these keep its cost
-- to that queue's open runs and live tasks, not every run the store holds.
CREATE INDEX runs_open_by_queue ON runs (task_queue) WHERE status = 'running';
CREATE INDEX tasks_live_by_queue ON tasks (queue) WHERE status IN ('pending', 'running');
