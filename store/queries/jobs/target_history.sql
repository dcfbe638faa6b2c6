-- Every state named, so that the index on (state, target) serves.
SELECT id AS "id!", state AS "state!: JobState", payload AS "payload!", result, last_error,
    stopped_by, cancel_cause AS "cancel_cause?: CancelCause"
FROM jobs
WHERE state IN ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled')
    AND target_key = ?1
ORDER BY id DESC LIMIT ?2
