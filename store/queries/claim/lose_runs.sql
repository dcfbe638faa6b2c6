UPDATE job_runs SET finished_at = ?1, outcome = 'lost',
    error = 'lease expired: the worker stopped heartbeating (crashed or hung)'
WHERE finished_at IS NULL AND job IN
    (SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at < ?1)
