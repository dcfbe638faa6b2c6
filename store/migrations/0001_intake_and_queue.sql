-- Every delivery that reached the webhook endpoints, refused ones included.
CREATE TABLE deliveries (
    id           INTEGER PRIMARY KEY,
    forge        TEXT    NOT NULL,
    -- NULL when the forge sent no delivery header (refused with 400).
    delivery_id  TEXT,
    -- The event header as sent; NULL when missing or not trusted.
    event        TEXT,
    -- The event as Forgehand understood it, e.g. `issues.labeled`.
    event_name   TEXT,
    outcome      TEXT    NOT NULL CHECK (outcome IN ('accepted', 'ignored', 'duplicate', 'rejected')),
    status_code  INTEGER NOT NULL,
    -- Why it was ignored or rejected.
    reason       TEXT,
    repo         TEXT,
    target       INTEGER,
    sender       TEXT,
    -- The label, assignee or command that made it interesting.
    detail       TEXT,
    -- The verified body of an accepted delivery, LZ4-compressed, kept so
    -- nothing accepted is lost.
    payload      BLOB,
    received_at  INTEGER NOT NULL
);

-- A delivery id is acted on once. Duplicates and refused deliveries are
-- recorded beside the first without taking its place.
CREATE UNIQUE INDEX deliveries_once ON deliveries (forge, delivery_id)
    WHERE outcome IN ('accepted', 'ignored');

CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    delivery          INTEGER REFERENCES deliveries (id),
    kind              TEXT    NOT NULL,
    -- The typed job (`forgehand_bot::job::Job`) as JSON.
    payload           TEXT    NOT NULL,
    -- `forge:owner/name#number`: at most one job runs per target.
    target_key        TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled')),
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

CREATE INDEX jobs_ready ON jobs (state, run_at, id);
-- The database itself holds the rule "one running job per target"; the
-- claim query's look for a running job of the same target uses it too.
CREATE UNIQUE INDEX jobs_one_running_per_target ON jobs (target_key) WHERE state = 'running';

-- One row per attempt: who ran it, when, and how it ended.
CREATE TABLE job_runs (
    id           INTEGER PRIMARY KEY,
    job          INTEGER NOT NULL REFERENCES jobs (id),
    attempt      INTEGER NOT NULL,
    worker       TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    -- succeeded, failed, retry, dead, released, lost, cancelled; NULL while running.
    outcome      TEXT,
    error        TEXT
);
CREATE INDEX job_runs_by_job ON job_runs (job);
