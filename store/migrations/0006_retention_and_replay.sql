-- Retention (`database.retention_days` and friends): what is pruned is
-- found by age through an index, never by reading a whole table.

-- Deliveries by outcome and age: refused ones are kept for less time
-- than the others, and each is found without stepping over the other.
CREATE INDEX deliveries_by_age ON deliveries (outcome, received_at);

-- Finished jobs by when they finished (only finished jobs have a time).
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- A duplicate's first delivery: a redelivery's (same delivery id), or a
-- replayed body's (same body, another delivery id).
ALTER TABLE deliveries ADD COLUMN duplicate_of INTEGER;

-- The SHA-256 of every accepted or ignored body, kept longer than the
-- deliveries (`database.digest_retention_days`): a captured signed body
-- replayed under a new delivery id is recognised as a duplicate, also
-- once its first delivery has been pruned. `signer` is `github` or
-- `gitea` (Gitea and Forgejo share their secrets). `delivery` is the
-- first delivery's row, which may be gone.
CREATE TABLE payload_digests (
    signer       TEXT    NOT NULL,
    sha256       BLOB    NOT NULL,
    event        TEXT,
    delivery     INTEGER NOT NULL,
    received_at  INTEGER NOT NULL,
    PRIMARY KEY (signer, sha256)
) WITHOUT ROWID;
CREATE INDEX payload_digests_by_age ON payload_digests (received_at);
