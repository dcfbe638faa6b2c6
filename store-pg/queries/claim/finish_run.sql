UPDATE job_runs SET finished_at = $1, outcome = $2, error = $3 WHERE id = $4
