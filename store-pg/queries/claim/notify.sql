-- Wakes idle workers on every host (LISTEN forgehand_jobs) once the
-- transaction commits: a job is waiting, due at $1 (Unix ms; 0: at once).
SELECT FROM pg_notify('forgehand_jobs', $1::BIGINT::TEXT)
