-- The counts kept by the triggers of migration 0002: a few rows per
-- state, however many jobs there are.
SELECT state AS "state!: JobState", SUM(n)::BIGINT AS "count!"
FROM job_counts GROUP BY state
