"""The SQL both dialects run: plain functions over a connection, one module per concern.

SQLite's spelling is the one written here; :mod:`keepgoing._store.postgres.sql`
rewrites the few places where PostgreSQL says it differently (see
:mod:`keepgoing._store.sql.dialect`). Nothing here imports a database driver.
"""
