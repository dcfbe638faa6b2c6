-- The delivery holding an id. `outcome IN (...)` repeats the condition of
-- the partial index deliveries_once word for word, which is what lets
-- SQLite use it.
SELECT id FROM deliveries
WHERE forge = ?1 AND delivery_id = ?2 AND outcome IN ('accepted', 'ignored')
