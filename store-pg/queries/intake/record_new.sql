-- A delivery that holds its delivery id, its body's digest and its jobs
-- in one statement (one round trip, one run of the job-count trigger):
-- the delivery's row unless the id is already held; its digest unless the
-- body was recorded before; its jobs only when both were new. What was
-- taken says which path the caller goes on with (a duplicate, a replay,
-- or new). $1–$14: the delivery's row, as claim_delivery.sql; $15, $16:
-- the digest's signer and SHA-256 (NULL: none); $17: max attempts;
-- $18–$21: the jobs' kinds, payloads, target keys and supersedable flags.
WITH d AS (
    INSERT INTO deliveries (forge, delivery_id, event, event_name, outcome,
        status_code, reason, repo, target, sender, detail, payload, received_at, duplicate_of)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
    ON CONFLICT (forge, delivery_id) WHERE outcome IN ('accepted', 'ignored') DO NOTHING
    RETURNING id
),
g AS (
    INSERT INTO payload_digests (signer, sha256, event, delivery, received_at)
    SELECT $15::TEXT, $16::BYTEA, $3, d.id, $13 FROM d WHERE $16::BYTEA IS NOT NULL
    ON CONFLICT (signer, sha256) DO NOTHING
    RETURNING delivery
),
j AS (
    INSERT INTO jobs (delivery, kind, payload, target_key, state, max_attempts, run_at,
        created_at, updated_at, supersedable)
    SELECT d.id, k.kind, k.payload, k.target_key, 'queued', $17, $13, $13, $13, k.supersedable
    FROM d CROSS JOIN UNNEST($18::TEXT[], $19::TEXT[], $20::TEXT[], $21::BOOL[])
        WITH ORDINALITY AS k(kind, payload, target_key, supersedable, n)
    WHERE $16::BYTEA IS NULL OR EXISTS (SELECT 1 FROM g)
    ORDER BY k.n
    RETURNING id
)
SELECT (SELECT id FROM d) AS delivery,
    EXISTS (SELECT 1 FROM g) AS "digest_claimed!",
    ARRAY(SELECT id FROM j ORDER BY id) AS "jobs!"
