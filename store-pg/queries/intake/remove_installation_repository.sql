DELETE FROM installation_repositories WHERE installation = $1 AND repository = $2
