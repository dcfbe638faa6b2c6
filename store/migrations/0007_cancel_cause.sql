-- Why a job was cancelled, in a column of its own instead of read back
-- out of its error text: `stopped` (`/forgehand stop`) or `superseded`
-- (a newer request on the same target while it waited).
ALTER TABLE jobs ADD COLUMN cancel_cause TEXT
    CHECK (cancel_cause IS NULL OR cancel_cause = 'stopped' OR cancel_cause = 'superseded');

UPDATE jobs SET cancel_cause = 'superseded'
    WHERE state = 'cancelled' AND last_error LIKE 'superseded%';
UPDATE jobs SET cancel_cause = 'stopped'
    WHERE state = 'cancelled' AND cancel_cause IS NULL;
