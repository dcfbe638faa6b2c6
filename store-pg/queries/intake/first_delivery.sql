-- The delivery holding an id, through the partial index deliveries_once.
SELECT id FROM deliveries
WHERE forge = $1 AND delivery_id = $2 AND outcome IN ('accepted', 'ignored')
