-- Refused deliveries never have jobs.
DELETE FROM deliveries WHERE id IN (
    SELECT id FROM deliveries WHERE outcome = 'rejected' AND received_at < $1 LIMIT $2)
