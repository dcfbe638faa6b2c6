-- The jobs in each state, kept as rows change, so that /metrics reads a
-- few dozen rows instead of counting the jobs table.
--
-- Every statement that inserts, updates or deletes jobs adds what it
-- changed to the counts, in the same transaction (statement triggers over
-- the changed rows). One row per state would make every transaction that
-- queues, claims or ends a job wait for the others on that row until they
-- commit, replicas' intakes among them; each session instead adds to one
-- of 16 rows per state (by its backend's pid), and a count is the sum
-- of its slots. A statement takes its rows' locks in the order of the
-- states' names, so two statements never wait for each other crosswise.

CREATE TABLE job_counts (
    state  TEXT     NOT NULL,
    slot   SMALLINT NOT NULL,
    n      BIGINT   NOT NULL,
    PRIMARY KEY (state, slot)
);

-- Adds the changes (state, +n or -n) of one statement to this session's slot.
CREATE FUNCTION job_counts_add(changes JSONB) RETURNS void LANGUAGE sql AS $$
    INSERT INTO job_counts (state, slot, n)
    SELECT change.key, (pg_backend_pid() % 16)::SMALLINT, change.value::BIGINT
    FROM jsonb_each_text(changes) AS change
    WHERE change.value::BIGINT <> 0
    ORDER BY change.key
    ON CONFLICT (state, slot) DO UPDATE SET n = job_counts.n + EXCLUDED.n
$$;

CREATE FUNCTION job_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add((SELECT jsonb_object_agg(state, n)
        FROM (SELECT state, COUNT(*) AS n FROM new_jobs GROUP BY state) AS added));
    RETURN NULL;
END
$$;

CREATE FUNCTION job_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add((SELECT jsonb_object_agg(state, n)
        FROM (SELECT state, SUM(d) AS n
              FROM (SELECT state, 1 AS d FROM new_jobs
                    UNION ALL SELECT state, -1 AS d FROM old_jobs) AS moves
              GROUP BY state) AS changed));
    RETURN NULL;
END
$$;

CREATE FUNCTION job_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM job_counts_add((SELECT jsonb_object_agg(state, -n)
        FROM (SELECT state, COUNT(*) AS n FROM old_jobs GROUP BY state) AS removed));
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_counted_on_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_inserted();
CREATE TRIGGER jobs_counted_on_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_updated();
CREATE TRIGGER jobs_counted_on_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION job_counts_deleted();
