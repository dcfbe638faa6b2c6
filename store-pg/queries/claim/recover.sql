-- Returns jobs whose lease expired to the queue, or to the dead letters on
-- their last attempt, and ends their runs as lost, in one statement. The
-- expired jobs are locked and those another reaper (or their own worker,
-- heartbeating) holds are skipped: on several hosts at once, each job is
-- recovered, and each dead one reported, by one reaper only. Returns what
-- it changed, with the error the job had before. $1: now.
WITH expired AS (
    SELECT id, last_error FROM jobs
    WHERE state = 'running' AND lease_expires_at < $1
    FOR UPDATE SKIP LOCKED
),
lost AS (
    UPDATE job_runs SET finished_at = $1, outcome = 'lost',
        error = 'lease expired: the worker stopped heartbeating (crashed or hung)'
    WHERE finished_at IS NULL AND job IN (SELECT id FROM expired)
    RETURNING job, id
),
recovered AS (
    UPDATE jobs j SET
        state = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'queued' END,
        finished_at = CASE WHEN j.attempts >= j.max_attempts THEN $1 END,
        last_error = 'lease expired: the worker stopped heartbeating (crashed or hung)',
        lease_owner = NULL, lease_expires_at = NULL, updated_at = $1
    FROM expired e WHERE j.id = e.id
    RETURNING j.id, j.state, j.attempts, j.max_attempts, j.payload, e.last_error
)
SELECT r.id AS "id!", r.state AS "state!: JobState", r.attempts AS "attempts!",
    r.max_attempts AS "max_attempts!", r.payload AS "payload!", r.last_error,
    COALESCE((SELECT MAX(l.id) FROM lost l WHERE l.job = r.id),
             (SELECT MAX(x.id) FROM job_runs x WHERE x.job = r.id), 0) AS "run!"
FROM recovered r ORDER BY r.id
