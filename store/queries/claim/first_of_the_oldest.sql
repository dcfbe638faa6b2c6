-- The first claimable job among the 32 oldest due waiting ones: the usual
-- case, where little is held back. ?1: now.
SELECT j.id AS "id!" FROM (SELECT * FROM jobs WHERE state = 'queued' AND run_at <= ?1
    ORDER BY run_at, id LIMIT 32) j
WHERE
-- claimable: begin
    j.state = 'queued' AND j.run_at <= ?1
    AND (j.kind = 'command.stop' OR NOT EXISTS (SELECT 1 FROM jobs r
        WHERE r.target_key = j.target_key AND r.state = 'running' AND r.kind <> 'command.stop'))
    AND NOT (j.supersedable = 1 AND EXISTS (SELECT 1 FROM jobs n
        WHERE n.target_key = j.target_key AND n.state = 'queued' AND n.supersedable = 1
        AND n.id > j.id AND n.run_at <= ?1))
-- claimable: end
ORDER BY j.run_at, j.id LIMIT 1
