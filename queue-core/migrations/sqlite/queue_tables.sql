-- queue-core's tables for exactly-once effects (SQLite). Idempotent: safe to run at
-- every start (Outbox::migrate, Operations::migrate and Stages::migrate run it), or to
-- copy into your own migrations. Times are milliseconds since the epoch, by the
-- database's clock (queue-core's statements read it; no host's clock is used).

-- Jobs written inside the application's transaction, waiting for the relay to add them
-- to Redis. A row is deleted only after Redis acknowledged its add.
CREATE TABLE IF NOT EXISTS queue_outbox (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    queue          TEXT   NOT NULL,
    job_id         TEXT   NOT NULL,
    job_name       TEXT   NOT NULL,
    data           TEXT   NOT NULL,   -- the payload, JSON
    options        TEXT   NOT NULL,   -- the job's options, JSON (queue-core's own record)
    created_at_ms  INTEGER NOT NULL,
    attempts       INTEGER  NOT NULL DEFAULT 0,
    lease_owner    TEXT,              -- the relay that claimed the row, until lease_until_ms
    lease_until_ms INTEGER,
    last_error     TEXT,
    failed_at_ms   INTEGER,            -- set aside: can never be added (see last_error)
    row_key        TEXT,              -- random, given at the first claim: the key the relay
                                      -- marks the row relayed under in Redis
    UNIQUE (queue, job_id)
);
-- A table made before row_key existed needs it (SQLite has no ADD COLUMN IF NOT EXISTS:
-- Outbox::migrate adds it when it is missing; in your own migrations, add it once):
--   ALTER TABLE queue_outbox ADD COLUMN row_key TEXT;
CREATE INDEX IF NOT EXISTS queue_outbox_ready ON queue_outbox (id) WHERE failed_at_ms IS NULL;

-- One row per effect that must happen once: the key and the effect commit together.
CREATE TABLE IF NOT EXISTS queue_operations (
    operation_key TEXT PRIMARY KEY,
    result        TEXT,               -- the effect's result, JSON
    done_at_ms    INTEGER NOT NULL
);

-- The stages of multi-step work: one row per finished stage.
CREATE TABLE IF NOT EXISTS queue_stages (
    record_key TEXT   NOT NULL,
    stage      TEXT   NOT NULL,
    position   INTEGER  NOT NULL,
    result     TEXT,                  -- the stage's result, JSON
    done_at_ms INTEGER NOT NULL,
    PRIMARY KEY (record_key, stage)
);
