-- Looked up once per redelivery or per listed delivery, through the index
-- jobs_by_delivery.
SELECT id FROM jobs WHERE delivery = $1 ORDER BY id
