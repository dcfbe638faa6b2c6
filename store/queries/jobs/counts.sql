SELECT state AS "state!: JobState", COUNT(*) AS "count!: i64" FROM jobs GROUP BY state
