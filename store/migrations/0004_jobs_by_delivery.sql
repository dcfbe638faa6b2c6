-- The jobs a delivery made: read for every redelivery (inside the intake's
-- one writer, so a scan of all jobs there held up every webhook behind
-- it) and for every row of GET /api/deliveries.
CREATE INDEX jobs_by_delivery ON jobs (delivery);
