-- $1: only this forge (or NULL), $2: only this outcome (or NULL),
-- $3: only ids below this, $4: how many.
SELECT id, forge, delivery_id, event, event_name, outcome AS "outcome: Outcome",
    status_code, reason, repo, target, sender, detail, received_at, duplicate_of
FROM deliveries
WHERE ($1::TEXT IS NULL OR forge = $1) AND ($2::TEXT IS NULL OR outcome = $2) AND id < $3
ORDER BY id DESC LIMIT $4
