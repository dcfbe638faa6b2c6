-- The jobs the recovery below makes dead, read under the same write lock.
SELECT j.id AS "id!", COALESCE((SELECT MAX(r.id) FROM job_runs r WHERE r.job = j.id), 0) AS "run!: i64",
    j.attempts AS "attempts!", j.max_attempts AS "max_attempts!", j.payload AS "payload!", j.last_error
FROM jobs j
WHERE j.state = 'running' AND j.lease_expires_at < ?1 AND j.attempts >= j.max_attempts
