-- The schema of store/migrations (SQLite, 0001 to 0007) as it stands
-- after them, in PostgreSQL's terms: ids from identity columns, times as
-- Unix milliseconds (BIGINT), bodies and digests as BYTEA, flags as
-- BOOLEAN. Jobs and results stay JSON text, read back by serde.

-- Every delivery that reached the webhook endpoints, refused ones included.
CREATE TABLE deliveries (
    id           BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    forge        TEXT    NOT NULL,
    -- NULL when the forge sent no delivery header (refused with 400).
    delivery_id  TEXT,
    -- The event header as sent; NULL when missing or not trusted.
    event        TEXT,
    -- The event as Forgehand understood it, e.g. `issues.labeled`.
    event_name   TEXT,
    outcome      TEXT    NOT NULL CHECK (outcome IN ('accepted', 'ignored', 'duplicate', 'rejected')),
    status_code  BIGINT  NOT NULL,
    -- Why it was ignored or rejected.
    reason       TEXT,
    repo         TEXT,
    target       BIGINT,
    sender       TEXT,
    -- The label, assignee or command that made it interesting.
    detail       TEXT,
    -- The verified body of an accepted delivery, LZ4-compressed.
    payload      BYTEA,
    received_at  BIGINT  NOT NULL,
    -- A duplicate's first delivery: a redelivery's (same delivery id), or
    -- a replayed body's (same body, another delivery id).
    duplicate_of BIGINT
);

-- A delivery id is acted on once. Duplicates and refused deliveries are
-- recorded beside the first without taking its place; the intake's
-- INSERT … ON CONFLICT names this predicate.
CREATE UNIQUE INDEX deliveries_once ON deliveries (forge, delivery_id)
    WHERE outcome IN ('accepted', 'ignored');
-- Retention: refused deliveries are kept for less time than the others,
-- and each is found by age without stepping over the other.
CREATE INDEX deliveries_by_age ON deliveries (outcome, received_at);

CREATE TABLE jobs (
    id                BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery          BIGINT  REFERENCES deliveries (id),
    kind              TEXT    NOT NULL,
    -- The typed job (`forgehand_store::job::Job`) as JSON.
    payload           TEXT    NOT NULL,
    -- `forge:owner/name#number`: at most one job runs per target.
    target_key        TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled')),
    attempts          BIGINT  NOT NULL DEFAULT 0,
    max_attempts      BIGINT  NOT NULL,
    run_at            BIGINT  NOT NULL,
    lease_owner       TEXT,
    lease_expires_at  BIGINT,
    last_error        TEXT,
    result            TEXT,
    created_at        BIGINT  NOT NULL,
    updated_at        BIGINT  NOT NULL,
    finished_at       BIGINT,
    -- Set on a running job by `/forgehand stop`: the worker holding the
    -- job reads it between heartbeats and cancels the job with it.
    stop_reason       TEXT,
    -- The job (a stop, or a newer request) that ended this one.
    stopped_by        BIGINT,
    -- Work on its target: of a target's waiting work the newest is
    -- claimed first, and once its sender is authorized the older ones
    -- are cancelled.
    supersedable      BOOLEAN NOT NULL DEFAULT FALSE,
    -- Why it was cancelled: `/forgehand stop`, or a newer request.
    cancel_cause      TEXT    CHECK (cancel_cause IN ('stopped', 'superseded'))
);

-- The due waiting jobs, oldest first: what a claim reads first.
CREATE INDEX jobs_ready ON jobs (state, run_at, id);
-- The database itself holds the rule "one running job per target"; a
-- stop runs beside the job it stops, so stops are left out. Two claimers
-- racing for two jobs of one target meet here: the second gets a unique
-- violation and looks for another job.
CREATE UNIQUE INDEX jobs_one_running_per_target ON jobs (target_key)
    WHERE state = 'running' AND kind <> 'command.stop';
-- Claiming steps through the targets with waiting jobs (state first),
-- and takes each one's newest request or oldest other job by id.
CREATE INDEX jobs_by_state_and_target ON jobs (state, target_key, supersedable, id);
-- A target's waiting stops, found at once among many other waiting jobs.
CREATE INDEX jobs_waiting_stops ON jobs (target_key, id)
    WHERE state = 'queued' AND kind = 'command.stop';
-- A target's history, newest first (retry, go, supersede, stop).
CREATE INDEX jobs_by_target ON jobs (target_key, id);
-- The jobs a delivery made: read for every redelivery, inside the intake.
CREATE INDEX jobs_by_delivery ON jobs (delivery);
-- Finished jobs by when they finished (only finished jobs have a time).
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- One row per attempt: who ran it, when, and how it ended.
CREATE TABLE job_runs (
    id           BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job          BIGINT  NOT NULL REFERENCES jobs (id),
    attempt      BIGINT  NOT NULL,
    worker       TEXT    NOT NULL,
    started_at   BIGINT  NOT NULL,
    finished_at  BIGINT,
    -- succeeded, failed, retry, dead, released, lost, cancelled; NULL while running.
    outcome      TEXT,
    error        TEXT
);
CREATE INDEX job_runs_by_job ON job_runs (job);

-- GitHub App installations, kept from their webhooks: which accounts
-- installed the App and which repositories it can reach.
CREATE TABLE installations (
    id          BIGINT  PRIMARY KEY,
    account     TEXT    NOT NULL,
    -- active, suspended or deleted
    state       TEXT    NOT NULL,
    updated_at  BIGINT  NOT NULL
);
CREATE TABLE installation_repositories (
    installation  BIGINT  NOT NULL REFERENCES installations (id),
    repository    TEXT    NOT NULL,
    PRIMARY KEY (installation, repository)
);

-- The SHA-256 of every accepted or ignored body, kept longer than the
-- deliveries: a captured signed body replayed under a new delivery id is
-- a duplicate, also once its first delivery has been pruned. `signer` is
-- `github` or `gitea` (Gitea and Forgejo share their secrets);
-- `delivery` is the first delivery's row, which may be gone.
CREATE TABLE payload_digests (
    signer       TEXT    NOT NULL,
    sha256       BYTEA   NOT NULL,
    event        TEXT,
    delivery     BIGINT  NOT NULL,
    received_at  BIGINT  NOT NULL,
    PRIMARY KEY (signer, sha256)
);
CREATE INDEX payload_digests_by_age ON payload_digests (received_at);
