INSERT INTO job_runs (job, attempt, worker, started_at) VALUES ($1, $2, $3, $4) RETURNING id
