-- The monthly report's "uploaded" file: one per month. The primary key makes an upload
-- run again (its stage was not recorded when a worker died) a no-op, not a second file.
CREATE TABLE report_files (
    month       TEXT PRIMARY KEY, -- YYYY-MM
    content     TEXT NOT NULL,
    uploaded_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- An export's batches: one row per batch, so that a retried export resumes where the
-- last attempt stopped and never writes a batch twice.
CREATE TABLE export_batches (
    export_id TEXT NOT NULL,
    batch     INTEGER NOT NULL,
    content   TEXT NOT NULL,
    PRIMARY KEY (export_id, batch)
);

-- A delivered export: its batches joined into one file.
CREATE TABLE export_files (
    export_id    TEXT PRIMARY KEY,
    rows_written INTEGER NOT NULL,
    content      TEXT NOT NULL,
    delivered_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
