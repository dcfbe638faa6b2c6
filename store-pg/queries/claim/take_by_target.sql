-- The claimable job found target by target, each target once, for when
-- the oldest waiting jobs are all held back (a target with a running job,
-- or many requests of which only the newest counts): walking them one by
-- one would cost a claim time in proportion to how many wait. Of a target
-- with no running job, its newest due request (which supersedes the
-- others) and its oldest other due job (help, explanations, stops) are
-- candidates; of a target with one, its oldest due stop. The oldest
-- candidate that no other claimer holds is taken, as in take_oldest.sql.
-- $1: now, $2: the worker, $3: the lease's end.
WITH RECURSIVE waiting(target) AS (
    (SELECT target_key FROM jobs WHERE state = 'queued' ORDER BY target_key LIMIT 1)
    UNION ALL
    SELECT (SELECT target_key FROM jobs WHERE state = 'queued' AND target_key > w.target
            ORDER BY target_key LIMIT 1)
    FROM waiting w WHERE w.target IS NOT NULL
),
targets(target, busy) AS (
    SELECT w.target, EXISTS (SELECT 1 FROM jobs r WHERE r.state = 'running'
                             AND r.target_key = w.target AND r.kind <> 'command.stop')
    FROM waiting w WHERE w.target IS NOT NULL
),
candidates(id) AS (
    SELECT (SELECT id FROM jobs WHERE state = 'queued' AND target_key = t.target
            AND supersedable AND run_at <= $1 ORDER BY id DESC LIMIT 1)
    FROM targets t WHERE NOT t.busy
    UNION ALL
    SELECT (SELECT id FROM jobs WHERE state = 'queued' AND target_key = t.target
            AND NOT supersedable AND run_at <= $1 ORDER BY id LIMIT 1)
    FROM targets t WHERE NOT t.busy
    UNION ALL
    SELECT (SELECT id FROM jobs WHERE state = 'queued' AND kind = 'command.stop'
            AND target_key = t.target AND run_at <= $1 ORDER BY id LIMIT 1)
    FROM targets t WHERE t.busy
)
UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_owner = $2,
    lease_expires_at = $3, updated_at = $1
WHERE id = (
    SELECT j.id FROM jobs j
    WHERE j.id IN (SELECT c.id FROM candidates c WHERE c.id IS NOT NULL)
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
