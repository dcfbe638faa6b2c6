-- The jobs of the first delivery of an id (for duplicates that do not
-- point at their first).
SELECT j.id FROM jobs j JOIN deliveries d ON j.delivery = d.id
WHERE d.forge = $1 AND d.delivery_id = $2 AND d.outcome IN ('accepted', 'ignored') ORDER BY j.id
