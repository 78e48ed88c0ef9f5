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
