-- Ends an attempt, fenced on the lease's owner. $1: the new state,
-- $2: attempts to give back (a released attempt does not count),
-- $3: the error, $4: the result, $5: when to run again, $6: now,
-- $7: finished at, $8: the job, $9: the worker, $10: the cancellation's cause.
UPDATE jobs SET state = $1, attempts = attempts - $2, lease_owner = NULL, lease_expires_at = NULL,
    last_error = COALESCE($3, last_error), result = COALESCE($4, result),
    run_at = COALESCE($5, run_at), updated_at = $6, finished_at = $7,
    cancel_cause = COALESCE($10, cancel_cause)
WHERE id = $8 AND state = 'running' AND lease_owner = $9
