DELETE FROM installation_repositories WHERE installation = $1
