-- Users get a public id (random, unique for ever: job ids derive from it, so a fresh or
-- restored database can never meet an old job of another user) and the hash of the
-- access token they were given at sign-up. Existing users get a public id; without a
-- token, only an operator reads their coupons.
ALTER TABLE users ADD COLUMN public_id TEXT;
ALTER TABLE users ADD COLUMN token_hash TEXT;
UPDATE users SET public_id = replace(gen_random_uuid()::text, '-', '') WHERE public_id IS NULL;
CREATE UNIQUE INDEX users_public_id ON users (public_id);

-- The mail log was called `outbox`; the job outbox (queue_outbox) is another thing.
ALTER TABLE outbox RENAME TO sent_mail;
