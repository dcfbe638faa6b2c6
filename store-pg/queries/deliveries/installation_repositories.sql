SELECT installation, repository FROM installation_repositories ORDER BY repository
