-- Runs of finished jobs past their time, a batch ($2) at a time; $1: the
-- time. The finished states are named: whatever its finished_at says, a
-- waiting or running job stays.
DELETE FROM job_runs WHERE job IN (
    SELECT id FROM jobs WHERE finished_at < $1
    AND state <> 'queued' AND state <> 'running' ORDER BY finished_at LIMIT $2)
