INSERT INTO installations (id, account, state, updated_at) VALUES ($1, $2, COALESCE($3, 'active'), $4)
ON CONFLICT (id) DO UPDATE SET account = $2, state = COALESCE($3, installations.state), updated_at = $4
