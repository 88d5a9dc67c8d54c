CREATE TABLE users (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    email      TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    birthday   TEXT NOT NULL, -- YYYY-MM-DD
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- One row per message ever sent: the idempotency key makes a second send of the
-- same message a unique violation instead of a second email.
CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,
    to_email        TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    sent_at         TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE TABLE coupon_grants (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    campaign_id TEXT NOT NULL,
    date        TEXT NOT NULL, -- YYYY-MM-DD
    granted_at  TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    UNIQUE (user_id, campaign_id, date)
);

CREATE INDEX users_birthday_month_day ON users (substr(birthday, 6, 5));
