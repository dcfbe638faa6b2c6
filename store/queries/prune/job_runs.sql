-- Runs of finished jobs past their time, a batch (?2) at a time; ?1: the
-- time. The finished states are named one by one: the partial index
-- jobs_finished does not need it, but it keeps a waiting or running job
-- out whatever its finished_at says.
DELETE FROM job_runs WHERE job IN (
    SELECT id FROM jobs WHERE finished_at < ?1
    AND state <> 'queued' AND state <> 'running' ORDER BY finished_at LIMIT ?2)
