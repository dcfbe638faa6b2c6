-- Looked up once per redelivery or per listed delivery: it searches the
-- index jobs_by_delivery, never scans a table that grows with every delivery.
SELECT id AS "id!" FROM jobs WHERE delivery = ?1 ORDER BY id
