INSERT INTO installations (id, account, state, updated_at) VALUES (?1, ?2, coalesce(?3, 'active'), ?4)
ON CONFLICT (id) DO UPDATE SET account = ?2, state = coalesce(?3, state), updated_at = ?4
