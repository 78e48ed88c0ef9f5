-- Why a worker stopped, recorded by whoever stops it on purpose (the kill API,
-- a group backend scaling down or replacing a replica, a drain that timed out,
-- the worker itself restarting), before the signal is sent. The reaper and the
-- release of a stopping worker's attempts stamp each attempt they take from
-- that worker with the newest stop recorded for it ('unexplained' without one).
-- ``state`` is 'pending' until the signal was sent ('sent'); a signal that
-- could not be sent removes its row.
CREATE TABLE worker_stops (
    stop_id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    worker_id    TEXT             NOT NULL,
    cause        TEXT             NOT NULL,
    actor_kind   TEXT             NOT NULL,
    actor_id     TEXT             NOT NULL,
    via          TEXT             NOT NULL,
    detail       TEXT             NOT NULL,
    state        TEXT             NOT NULL,
    recorded_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX worker_stops_worker ON worker_stops (worker_id, stop_id);
CREATE INDEX worker_stops_recorded ON worker_stops (recorded_at);
