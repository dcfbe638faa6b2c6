-- Asks the target's running work to stop. $1: why, $2: the stop job, $3: now, $4: the target.
WITH stopped AS (
    UPDATE jobs SET stop_reason = $1, stopped_by = $2, updated_at = $3
    WHERE target_key = $4 AND state = 'running' AND kind <> 'command.stop'
    RETURNING id
)
SELECT id AS "id!" FROM stopped ORDER BY id
