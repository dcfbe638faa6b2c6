SELECT id AS "id!", delivery, kind AS "kind!: JobKind", payload AS "payload!", target_key AS "target_key!",
    state AS "state!: JobState", attempts AS "attempts!", max_attempts AS "max_attempts!", run_at AS "run_at!",
    lease_owner, lease_expires_at, last_error, result, cancel_cause AS "cancel_cause?: CancelCause",
    created_at AS "created_at!", updated_at AS "updated_at!", finished_at
FROM jobs WHERE id = ?1
