-- Takes the oldest claimable job among the 32 oldest due waiting ones
-- (the usual case, where little is held back), skipping any that another
-- claimer holds locked: claimers on every host take different jobs
-- without waiting for each other. A job of a target whose other job is
-- being claimed at the same moment passes the check below, and the
-- unique index jobs_one_running_per_target then refuses the second: the
-- caller looks again. $1: now, $2: the worker, $3: the lease's end.
UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = $2,
    lease_expires_at = $3, updated_at = $1
WHERE id = (
    SELECT j.id FROM jobs j
    WHERE j.id IN (SELECT o.id FROM jobs o WHERE o.state = 'queued' AND o.run_at <= $1
                   ORDER BY o.run_at, o.id LIMIT 32)
    AND
-- claimable: begin
    j.state = 'queued' AND j.run_at <= $1
    AND (j.kind = 'command.stop' OR NOT EXISTS (SELECT 1 FROM jobs r
        WHERE r.target_key = j.target_key AND r.state = 'running' AND r.kind <> 'command.stop'))
    AND NOT (j.supersedable AND EXISTS (SELECT 1 FROM jobs n
        WHERE n.target_key = j.target_key AND n.state = 'queued' AND n.supersedable
        AND n.id > j.id AND n.run_at <= $1))
    -- Of a target's claimable work, only what a single writer would take
    -- first: while another claimer holds that job (and SKIP LOCKED passes
    -- over it), the target's later jobs wait instead of overtaking it.
    AND (j.kind = 'command.stop' OR NOT EXISTS (SELECT 1 FROM jobs e
        WHERE e.target_key = j.target_key AND e.state = 'queued' AND e.kind <> 'command.stop'
        AND e.run_at <= $1 AND (e.run_at, e.id) < (j.run_at, j.id)
        AND NOT (e.supersedable AND EXISTS (SELECT 1 FROM jobs o
            WHERE o.target_key = e.target_key AND o.state = 'queued' AND o.supersedable
            AND o.id > e.id AND o.run_at <= $1))))
-- claimable: end
    ORDER BY j.run_at, j.id LIMIT 1
    FOR UPDATE OF j SKIP LOCKED)
RETURNING id, attempts, max_attempts, payload, last_error
