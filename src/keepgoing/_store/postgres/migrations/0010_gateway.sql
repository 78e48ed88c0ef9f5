-- The model gateway: one row per model call (the usage ledger), a per-key daily
-- roll-up kept in the same transaction (so budgets never scan the ledger), and the
-- limits of gateway keys (tokens with the gateway.use permission).
CREATE TABLE gateway_calls (
    call_id TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    model_asked TEXT NOT NULL,
    model_answered TEXT,
    provider TEXT,
    input_tokens BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    latency DOUBLE PRECISION NOT NULL,
    ttft DOUBLE PRECISION,
    status TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    error TEXT,
    streamed INTEGER NOT NULL DEFAULT 0,
    tries INTEGER NOT NULL DEFAULT 1,
    run_id TEXT,
    step INTEGER,
    attempt INTEGER,
    operation_id TEXT,
    attempt_state TEXT NOT NULL DEFAULT 'none',
    prompt TEXT,
    answer TEXT
);
CREATE INDEX gateway_calls_key ON gateway_calls (key_id, created_at);
CREATE INDEX gateway_calls_step ON gateway_calls (run_id, step, attempt);
CREATE INDEX gateway_calls_created ON gateway_calls (created_at);

CREATE TABLE gateway_spend (
    key_id TEXT NOT NULL,
    day TEXT NOT NULL,
    requests INTEGER NOT NULL,
    tokens BIGINT NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (key_id, day)
);

CREATE TABLE gateway_keys (
    token_id TEXT PRIMARY KEY,
    models TEXT,
    requests_per_minute INTEGER,
    tokens_per_minute INTEGER,
    daily_budget DOUBLE PRECISION,
    total_budget DOUBLE PRECISION,
    updated_at DOUBLE PRECISION NOT NULL
);
