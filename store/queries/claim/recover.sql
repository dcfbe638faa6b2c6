UPDATE jobs SET
    state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
    finished_at = CASE WHEN attempts >= max_attempts THEN ?1 END,
    last_error = 'lease expired: the worker stopped heartbeating (crashed or hung)',
    lease_owner = NULL, lease_expires_at = NULL, updated_at = ?1
WHERE state = 'running' AND lease_expires_at < ?1
