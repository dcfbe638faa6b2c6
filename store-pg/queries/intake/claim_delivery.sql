-- Inserts nothing when the delivery id is already held (also by another
-- replica's intake: its uncommitted row makes this wait for its end).
INSERT INTO deliveries (forge, delivery_id, event, event_name, outcome,
    status_code, reason, repo, target, sender, detail, payload, received_at, duplicate_of)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (forge, delivery_id) WHERE outcome IN ('accepted', 'ignored') DO NOTHING
RETURNING id
