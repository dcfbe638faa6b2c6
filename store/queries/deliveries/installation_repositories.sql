SELECT installation AS "installation!", repository AS "repository!"
FROM installation_repositories ORDER BY repository
