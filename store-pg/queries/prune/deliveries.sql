-- Deliveries other than refused ones, unless a job still points at one
-- (a waiting or running job, or a finished one not yet past its time).
DELETE FROM deliveries WHERE id IN (
    SELECT d.id FROM deliveries d WHERE d.outcome IN ('accepted', 'ignored', 'duplicate')
    AND d.received_at < $1 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.delivery = d.id) LIMIT $2)
