-- Browser sessions: the cookie carries a session id and a secret (kept here only as its
-- SHA-256), never the API token. A session ends when it has been idle too long, when
-- its absolute lifetime (expires_at) is over, at sign-out (ended_at), or when its token
-- is revoked. A worker's database role is granted nothing on it.
CREATE TABLE ui_sessions (
    session_id  TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    token_id    TEXT NOT NULL,
    created_at  REAL NOT NULL,
    seen_at     REAL NOT NULL,
    expires_at  REAL NOT NULL,
    ended_at    REAL
);
CREATE INDEX ui_sessions_token ON ui_sessions (token_id);
CREATE INDEX ui_sessions_expires ON ui_sessions (expires_at);

-- Gateway reservations: a call of a key with limits is admitted by inserting a
-- 'pending' ledger row (its estimated tokens and cost) in the transaction that checks
-- the limits, and settled in place when it ends.
CREATE INDEX gateway_calls_pending ON gateway_calls (key_id, created_at)
    WHERE status = 'pending';
