-- The same schema as 0001, with every CHECK written as a chain of `=`
-- comparisons instead of `IN (…)`. SQLite evaluates a constant IN list of
-- more than two values by building a temporary b-tree, and a CHECK runs on
-- every insert: on the intake path that was a third of the cost of a row
-- (bench/README.md). SQLite cannot change a CHECK in place, so the three
-- tables are rebuilt, keeping every row and id.

-- The new tables point at each other; each rename below rewrites those
-- references to the final names, and the old tables are dropped children
-- first, so no foreign key is broken at any step.

CREATE TABLE deliveries_new (
    id           INTEGER PRIMARY KEY,
    forge        TEXT    NOT NULL,
    -- NULL when the forge sent no delivery header (refused with 400).
    delivery_id  TEXT,
    -- The event header as sent; NULL when missing or not trusted.
    event        TEXT,
    -- The event as Forgehand understood it, e.g. `issues.labeled`.
    event_name   TEXT,
    outcome      TEXT    NOT NULL CHECK (outcome = 'accepted' OR outcome = 'ignored'
                                         OR outcome = 'duplicate' OR outcome = 'rejected'),
    status_code  INTEGER NOT NULL,
    -- Why it was ignored or rejected.
    reason       TEXT,
    repo         TEXT,
    target       INTEGER,
    sender       TEXT,
    -- The label, assignee or command that made it interesting.
    detail       TEXT,
    -- The verified body of an accepted delivery, LZ4-compressed, when
    -- `database.keep_payloads` is set.
    payload      BLOB,
    received_at  INTEGER NOT NULL
);
INSERT INTO deliveries_new SELECT * FROM deliveries;

CREATE TABLE jobs_new (
    id                INTEGER PRIMARY KEY,
    delivery          INTEGER REFERENCES deliveries_new (id),
    kind              TEXT    NOT NULL,
    -- The typed job (`forgehand_bot::job::Job`) as JSON.
    payload           TEXT    NOT NULL,
    -- `forge:owner/name#number`: at most one job runs per target.
    target_key        TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state = 'queued' OR state = 'running'
                                              OR state = 'succeeded' OR state = 'failed'
                                              OR state = 'dead' OR state = 'cancelled'),
    attempts          INTEGER NOT NULL DEFAULT 0,
    max_attempts      INTEGER NOT NULL,
    run_at            INTEGER NOT NULL,
    lease_owner       TEXT,
    lease_expires_at  INTEGER,
    last_error        TEXT,
    result            TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    finished_at       INTEGER
);
INSERT INTO jobs_new SELECT * FROM jobs;

CREATE TABLE job_runs_new (
    id           INTEGER PRIMARY KEY,
    job          INTEGER NOT NULL REFERENCES jobs_new (id),
    attempt      INTEGER NOT NULL,
    worker       TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    -- succeeded, failed, retry, dead, released, lost, cancelled; NULL while running.
    outcome      TEXT,
    error        TEXT
);
INSERT INTO job_runs_new SELECT * FROM job_runs;

DROP TABLE job_runs;
DROP TABLE jobs;
DROP TABLE deliveries;
ALTER TABLE deliveries_new RENAME TO deliveries;
ALTER TABLE jobs_new RENAME TO jobs;
ALTER TABLE job_runs_new RENAME TO job_runs;

-- A delivery id is acted on once. Duplicates and refused deliveries are
-- recorded beside the first without taking its place. (A two-value IN
-- list is compiled to comparisons; the intake's upsert names this exact
-- predicate.)
CREATE UNIQUE INDEX deliveries_once ON deliveries (forge, delivery_id)
    WHERE outcome IN ('accepted', 'ignored');

CREATE INDEX jobs_ready ON jobs (state, run_at, id);
-- The database itself holds the rule "one running job per target"; the
-- claim query's look for a running job of the same target uses it too.
CREATE UNIQUE INDEX jobs_one_running_per_target ON jobs (target_key) WHERE state = 'running';

CREATE INDEX job_runs_by_job ON job_runs (job);
