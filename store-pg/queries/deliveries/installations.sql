SELECT id, account, state, updated_at FROM installations ORDER BY id
