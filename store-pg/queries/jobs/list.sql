-- $1: only this state (or NULL for all), $2: only ids below this, $3: how many.
SELECT id, delivery, kind AS "kind: JobKind", payload, target_key,
    state AS "state: JobState", attempts, max_attempts, run_at,
    lease_owner, lease_expires_at, last_error, result, cancel_cause AS "cancel_cause: CancelCause",
    created_at, updated_at, finished_at
FROM jobs
WHERE ($1::TEXT IS NULL OR state = $1) AND id < $2
ORDER BY id DESC LIMIT $3
