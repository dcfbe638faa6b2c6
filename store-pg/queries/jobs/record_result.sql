UPDATE jobs SET result = $1, updated_at = $2 WHERE id = $3
