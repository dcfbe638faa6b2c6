SELECT id AS "id!", account AS "account!", state AS "state!", updated_at AS "updated_at!"
FROM installations ORDER BY id
