CREATE TABLE users (
    id         BIGSERIAL PRIMARY KEY,
    email      TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    birthday   TEXT NOT NULL, -- YYYY-MM-DD
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per message ever sent: the idempotency key makes a second send of the
-- same message a unique violation instead of a second email.
CREATE TABLE outbox (
    id              BIGSERIAL PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    to_email        TEXT NOT NULL,
    subject         TEXT NOT NULL,
    body            TEXT NOT NULL,
    sent_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE coupon_grants (
    id          BIGSERIAL PRIMARY KEY,
    user_id     BIGINT NOT NULL REFERENCES users(id),
    campaign_id TEXT NOT NULL,
    date        TEXT NOT NULL, -- YYYY-MM-DD
    granted_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (user_id, campaign_id, date)
);

CREATE INDEX users_birthday_month_day ON users (substr(birthday, 6, 5));
