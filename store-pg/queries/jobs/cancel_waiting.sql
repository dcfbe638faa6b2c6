-- Cancels a target's waiting work older than job $2.
-- $1: why, $2: the job that cancels, $3: now, $4: the target, $5: the cause.
WITH cancelled AS (
    UPDATE jobs SET state = 'cancelled', last_error = $1, stopped_by = $2, cancel_cause = $5,
        finished_at = $3, updated_at = $3, lease_owner = NULL, lease_expires_at = NULL
    WHERE target_key = $4 AND state = 'queued' AND supersedable AND id < $2
    RETURNING id
)
SELECT id AS "id!" FROM cancelled ORDER BY id
