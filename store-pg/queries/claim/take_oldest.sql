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
    -- Of a target's due requests only the newest counts. Compared with
    -- the newest's id (found backwards on jobs_by_state_and_target), not
    -- with an EXISTS the planner ran as a scan of the table: each claim
    -- cost in proportion to the jobs waiting squared (76 ms with 1,000
    -- waiting on one issue, past the 30 s statement timeout with 50,000).
    AND (NOT j.supersedable OR j.id >= (SELECT n.id FROM jobs n
        WHERE n.state = 'queued' AND n.target_key = j.target_key AND n.supersedable
        AND n.run_at <= $1 ORDER BY n.id DESC LIMIT 1))
    -- Of a target's claimable work, only what a single writer would take
    -- first: while another claimer holds that job (and SKIP LOCKED passes
    -- over it), the target's later jobs wait instead of overtaking it.
    -- What a single writer takes first: its oldest due job that is not a
    -- request, or its newest due request, whichever comes first.
    AND (j.kind = 'command.stop' OR (
        NOT EXISTS (SELECT 1 FROM jobs e
            WHERE e.state = 'queued' AND e.target_key = j.target_key AND NOT e.supersedable
            AND e.kind <> 'command.stop' AND e.run_at <= $1
            AND (e.run_at, e.id) < (j.run_at, j.id))
        AND NOT EXISTS (SELECT 1 FROM (SELECT m.run_at, m.id FROM jobs m
            WHERE m.state = 'queued' AND m.target_key = j.target_key AND m.supersedable
            AND m.kind <> 'command.stop' AND m.run_at <= $1
            ORDER BY m.id DESC LIMIT 1) AS newest
            WHERE (newest.run_at, newest.id) < (j.run_at, j.id))))
-- claimable: end
    ORDER BY j.run_at, j.id LIMIT 1
    FOR UPDATE OF j SKIP LOCKED)
RETURNING id, attempts, max_attempts, payload, last_error
