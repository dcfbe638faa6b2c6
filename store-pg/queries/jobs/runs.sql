SELECT id, attempt, worker, started_at, finished_at, outcome AS "outcome: RunOutcome", error
FROM job_runs WHERE job = $1 ORDER BY id
