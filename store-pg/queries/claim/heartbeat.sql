-- $1: the lease's new end, $2: now, $3: the job, $4: the worker.
UPDATE jobs SET lease_expires_at = $1, updated_at = $2
WHERE id = $3 AND state = 'running' AND lease_owner = $4
