-- The claimable job found target by target, each target once, for when
-- the oldest waiting jobs are all held back (a target with a running job,
-- or many requests of which only the newest counts): walking them one by
-- one cost a claim time in proportion to how many waited. Of a target
-- with no running job, its newest due request (which supersedes the
-- others) and its oldest other due job (help, explanations, stops) are
-- candidates; of a target with one, its oldest due stop. The oldest
-- candidate wins. (CROSS JOIN keeps SQLite from reading all jobs to join
-- them to the few candidates, which it plans on a database without rows.)
-- ?1: now.
WITH RECURSIVE waiting(target) AS (
    SELECT (SELECT target_key FROM jobs WHERE state = 'queued' ORDER BY target_key LIMIT 1)
    UNION ALL
    SELECT (SELECT target_key FROM jobs WHERE state = 'queued' AND target_key > waiting.target
            ORDER BY target_key LIMIT 1)
    FROM waiting WHERE waiting.target IS NOT NULL
),
targets(target, busy) AS (
    SELECT w.target, EXISTS (SELECT 1 FROM jobs r WHERE r.state = 'running'
                             AND r.target_key = w.target AND r.kind <> 'command.stop')
    FROM waiting w WHERE w.target IS NOT NULL
),
candidates(id) AS (
    SELECT (SELECT id FROM jobs WHERE state = 'queued' AND target_key = t.target
            AND supersedable = 1 AND run_at <= ?1 ORDER BY id DESC LIMIT 1)
    FROM targets t WHERE NOT t.busy
    UNION ALL
    SELECT (SELECT id FROM jobs WHERE state = 'queued' AND target_key = t.target
            AND supersedable = 0 AND run_at <= ?1 ORDER BY id LIMIT 1)
    FROM targets t WHERE NOT t.busy
    UNION ALL
    SELECT (SELECT id FROM jobs WHERE state = 'queued' AND kind = 'command.stop'
            AND target_key = t.target AND run_at <= ?1 ORDER BY id LIMIT 1)
    FROM targets t WHERE t.busy
)
SELECT j.id AS "id!" FROM candidates c CROSS JOIN jobs j ON j.id = c.id ORDER BY j.run_at, j.id LIMIT 1
