-- Runs are deleted first, in the same transaction; a job that still has a
-- run is left.
DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs WHERE finished_at < $1
    AND state <> 'queued' AND state <> 'running' ORDER BY finished_at LIMIT $2)
AND NOT EXISTS (SELECT 1 FROM job_runs r WHERE r.job = jobs.id)
