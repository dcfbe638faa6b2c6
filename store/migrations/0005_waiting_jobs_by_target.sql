-- Claiming looks at each issue or pull request with waiting jobs once
-- (its newest waiting request, its oldest other waiting job, or its oldest
-- waiting stop when a job of it is running), instead of at every waiting
-- job: with thousands waiting on one target, every claim walked them all.
-- State first, so that the targets with waiting jobs can be stepped through;
-- the rowid that ends every entry orders a target's jobs by age.
DROP INDEX jobs_by_target;
CREATE INDEX jobs_by_state_and_target ON jobs (state, target_key, supersedable);

-- A target's waiting stops, found at once even among many other waiting
-- jobs of it (stops run beside the running job; nothing else does).
CREATE INDEX jobs_waiting_stops ON jobs (target_key)
    WHERE state = 'queued' AND kind = 'command.stop';
