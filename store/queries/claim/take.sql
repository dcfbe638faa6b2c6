-- Takes the candidate if it is still claimable, under the write lock.
-- ?1: now, ?2: the worker, ?3: the lease's end, ?4: the candidate.
UPDATE jobs AS j SET state = 'running', attempts = attempts + 1, lease_owner = ?2,
    lease_expires_at = ?3, updated_at = ?1
WHERE j.id = ?4 AND
-- claimable: begin
    j.state = 'queued' AND j.run_at <= ?1
    AND (j.kind = 'command.stop' OR NOT EXISTS (SELECT 1 FROM jobs r
        WHERE r.target_key = j.target_key AND r.state = 'running' AND r.kind <> 'command.stop'))
    AND NOT (j.supersedable = 1 AND EXISTS (SELECT 1 FROM jobs n
        WHERE n.target_key = j.target_key AND n.state = 'queued' AND n.supersedable = 1
        AND n.id > j.id AND n.run_at <= ?1))
-- claimable: end
RETURNING id AS "id!", attempts AS "attempts!", max_attempts AS "max_attempts!", payload AS "payload!",
    last_error
