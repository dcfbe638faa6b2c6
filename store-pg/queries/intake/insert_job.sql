INSERT INTO jobs (delivery, kind, payload, target_key, state, max_attempts, run_at, created_at,
    updated_at, supersedable)
VALUES ($1, $2, $3, $4, 'queued', $5, $6, $6, $6, $7)
RETURNING id
