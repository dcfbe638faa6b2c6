-- `/forgehand stop` and newer requests end other jobs of the same target.

-- Set on a running job by `/forgehand stop`: the worker holding the job
-- reads it between heartbeats and cancels the job with this reason.
ALTER TABLE jobs ADD COLUMN stop_reason TEXT;
-- The job (a stop, or a newer request) that ended this one.
ALTER TABLE jobs ADD COLUMN stopped_by INTEGER;
-- 1 for a job that works on its target (an issue, a review, a plan): of a
-- target's waiting work the newest is claimed first, and once its sender
-- is found to have write access the older ones are cancelled. Deciding
-- this at intake would let anyone who can comment cancel a maintainer's
-- request.
ALTER TABLE jobs ADD COLUMN supersedable INTEGER NOT NULL DEFAULT 0;

-- A stop must run while the job it stops is running: stops are left out
-- of "one running job per target".
DROP INDEX jobs_one_running_per_target;
CREATE UNIQUE INDEX jobs_one_running_per_target ON jobs (target_key)
    WHERE state = 'running' AND kind <> 'command.stop';

-- A target's waiting and running jobs, looked up when claiming, stopping
-- and superseding, and for a target's history (retry, go).
CREATE INDEX jobs_by_target ON jobs (target_key, state);

-- GitHub App installations, kept from their webhooks: which accounts
-- installed the App and which repositories it can reach.
CREATE TABLE installations (
    id          INTEGER PRIMARY KEY,
    account     TEXT    NOT NULL,
    -- active, suspended or deleted
    state       TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE TABLE installation_repositories (
    installation  INTEGER NOT NULL REFERENCES installations (id),
    repository    TEXT    NOT NULL,
    PRIMARY KEY (installation, repository)
);
