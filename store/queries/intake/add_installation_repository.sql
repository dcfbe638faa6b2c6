INSERT OR IGNORE INTO installation_repositories (installation, repository) VALUES (?1, ?2)
