SELECT id AS "id!", attempt AS "attempt!", worker AS "worker!", started_at AS "started_at!",
    finished_at, outcome AS "outcome?: RunOutcome", error
FROM job_runs WHERE job = ?1 ORDER BY id
