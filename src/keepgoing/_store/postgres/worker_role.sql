-- keepgoing: what a worker's database role may touch.
--
-- A deployed group's replicas run code that whoever deployed the group wrote.
-- On PostgreSQL they connect as a role of their own (KEEPGOING_WORKER_STORE on
-- the server), granted here exactly what a `keepgoing worker` uses: running
-- workflows (runs, history, tasks, timers, messages, events, children, patches),
-- volumes, attempt logs, its registry row and its stops, the orchestrator's
-- service leases and metric rows (kept by a trigger on history, which runs with
-- the worker's privileges), the ledger rows of its model calls, flow control's
-- token buckets and declared limits, and the volume read pins and tags. It is
-- granted nothing on tokens, ui_sessions, secrets, audit_log, group_revisions,
-- group_decisions or group_instances, and may only read worker_groups (a child
-- run takes its queue's revision from it) and gateway_keys.
--
-- `{role}` is replaced by the role's (quoted) name and `{schema}` by the schema
-- keepgoing's tables live in; `keepgoing store worker-role` runs this file.
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT ON keepgoing_schema TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON
    runs, history, tasks, timers, events, event_waits, run_patches, run_status,
    workflow_catalog, workers, worker_stops,
    volumes, volume_refs, volume_versions, volume_objects, volume_reads, volume_tags,
    attempt_logs, service_leases,
    metric_step_counts, metric_lease_counts, metric_step_bounds,
    gateway_calls, gateway_spend,
    limit_buckets, limits
TO {role};
-- A worker records its workflows' own retention policies (it could delete runs
-- outright with the grants above, so the policy rows give it nothing more).
GRANT SELECT, INSERT, UPDATE ON workflow_retention, volume_retention TO {role};
-- And their flow specs (a worker whose code has no limit for a workflow removes its
-- spec); with the grants above it could change its runs and tasks directly, so
-- these rows give it nothing more either.
GRANT SELECT, INSERT, UPDATE, DELETE ON workflow_flow TO {role};
GRANT SELECT ON worker_groups, gateway_keys TO {role};
GRANT SELECT ON keepgoing_queue_work, keepgoing_revision_work, metric_step_buckets, metric_totals
TO {role};
