SELECT 1 AS "one!: i64"
