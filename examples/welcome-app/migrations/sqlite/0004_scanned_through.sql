-- The last day the daily birthday scan covered, per campaign. A scan that runs after
-- days no worker was there for (its 00:05 run missed, and made up once on return)
-- covers each day since, so that no day's birthdays are lost; grants stay once per
-- user, campaign and day whatever a scan covers twice.
CREATE TABLE scanned_through (
    campaign TEXT PRIMARY KEY,
    day      TEXT NOT NULL -- YYYY-MM-DD
);
