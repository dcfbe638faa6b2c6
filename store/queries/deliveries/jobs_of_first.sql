-- The jobs of the first delivery of an id (for duplicates recorded before
-- they pointed at their first). `outcome IN (...)` repeats the condition
-- of the partial index deliveries_once word for word, which is what lets
-- SQLite use it.
SELECT j.id AS "id!" FROM jobs j JOIN deliveries d ON j.delivery = d.id
WHERE d.forge = ?1 AND d.delivery_id = ?2 AND d.outcome IN ('accepted', 'ignored') ORDER BY j.id
