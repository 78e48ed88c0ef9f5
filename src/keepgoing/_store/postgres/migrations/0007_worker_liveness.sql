-- A worker's liveness token (a lock file, or a PostgreSQL advisory lock), which
-- the lease reaper checks: held means alive, free means its process is gone.
ALTER TABLE workers ADD COLUMN liveness TEXT;
