SELECT id, state AS "state: JobState", payload, result, last_error, stopped_by,
    cancel_cause AS "cancel_cause: CancelCause"
FROM jobs WHERE target_key = $1
ORDER BY id DESC LIMIT $2
