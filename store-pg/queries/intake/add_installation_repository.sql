INSERT INTO installation_repositories (installation, repository) VALUES ($1, $2)
ON CONFLICT DO NOTHING
