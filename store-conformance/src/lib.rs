//! The one suite every store passes: each case is a function of a
//! [`Backend`] (what makes a fresh, empty, migrated store), and
//! [`store_suite!`] turns every case into a `#[tokio::test]` of the crate
//! that invokes it. `forgehand-store` runs it against SQLite
//! (`store/tests/conformance.rs`), `forgehand-store-pg` against a real
//! PostgreSQL (`store-pg/tests/conformance.rs`): the same assertions for
//! both. Cases use the [`Store`] trait only, and events and counts rather
//! than the clock: a lease is made to expire by renewing it for zero
//! milliseconds, not by waiting for it.
//!
//! A new case is a `pub async fn name(backend: &dyn Backend)` in one of
//! the modules and one line in [`store_suite!`]; a test of this crate
//! fails when a case is missing there.

pub mod fixtures;
pub mod intake;
pub mod queue;
pub mod reads;
pub mod retention;
pub mod targets;

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use forgehand_store::Store;

/// What the suite runs against.
#[async_trait]
pub trait Backend: Sync {
    /// A new, empty, migrated store of its own (a database nobody else
    /// uses), giving each job `max_attempts` attempts.
    async fn open(&self, max_attempts: u32) -> Opened;
}

/// A store, and what must live as long as it (its directory, its server).
pub struct Opened {
    pub store: Arc<dyn Store>,
    _keep: Box<dyn Any + Send + Sync>,
}

impl Opened {
    pub fn new(store: Arc<dyn Store>, keep: impl Any + Send + Sync) -> Self {
        Opened {
            store,
            _keep: Box::new(keep),
        }
    }
}

/// Every case of the suite as a test of the invoking crate, against
/// `$backend` (an expression of a type implementing [`Backend`]).
#[macro_export]
macro_rules! store_suite {
    ($backend:expr) => {
        $crate::store_suite!(@cases $backend;
            intake::one_batch_answers_each_delivery_as_if_it_came_alone,
            intake::a_batch_larger_than_one_statement_is_recorded_whole,
            intake::an_accepted_body_is_kept_compressed_and_comes_back_whole,
            intake::the_open_intake_transaction_is_all_or_nothing,
            intake::the_intake_writer_answers_each_request_once_it_is_committed,
            intake::a_body_replayed_under_a_new_delivery_id_is_a_duplicate,
            intake::a_refused_delivery_does_not_hold_its_delivery_id,
            intake::installations_are_recorded_with_their_deliveries,
            queue::a_claim_takes_the_oldest_due_job_with_a_lease,
            queue::a_retry_waits_for_its_backoff,
            queue::retried_attempts_keep_their_runs_and_last_error,
            queue::the_last_failed_attempt_dead_letters_the_job,
            queue::a_permanent_failure_is_final,
            queue::only_the_lease_owner_extends_or_ends_an_attempt,
            queue::an_expired_lease_returns_the_job_to_the_queue,
            queue::an_expired_lease_on_the_last_attempt_dead_letters,
            queue::concurrent_reapers_dead_letter_a_job_once,
            queue::a_released_job_does_not_count_the_attempt,
            queue::racing_claimers_get_each_job_once,
            queue::a_result_is_kept_as_json,
            queue::job_counts_follow_every_change,
            targets::the_database_refuses_a_second_running_job_for_one_target,
            targets::jobs_of_one_target_run_in_order_while_other_targets_proceed,
            targets::the_newest_waiting_request_goes_first_and_supersedes_the_older_ones,
            targets::a_stop_runs_beside_the_job_it_stops,
            targets::behind_many_held_back_jobs_a_claim_still_finds_the_right_one,
            targets::a_cancelled_job_keeps_its_cause,
            retention::old_deliveries_and_finished_jobs_go_and_waiting_or_running_work_stays,
            retention::pruning_goes_batch_by_batch_through_a_backlog,
            retention::a_replay_after_the_first_delivery_was_pruned_is_still_a_duplicate,
            reads::deliveries_are_listed_newest_first_and_filtered,
            reads::jobs_are_listed_by_state_and_paged,
            reads::what_is_not_there_reads_as_none,
        );
    };
    (@cases $backend:expr; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::$module::$case(&$backend).await
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    /// Every case in the modules is in [`store_suite!`], so none is
    /// written and never run.
    #[test]
    fn every_case_is_in_the_suite() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let suite = std::fs::read_to_string(src.join("lib.rs")).unwrap();
        let mut cases = 0;
        for module in ["intake", "queue", "reads", "retention", "targets"] {
            let text = std::fs::read_to_string(src.join(format!("{module}.rs"))).unwrap();
            for line in text.lines() {
                let Some(rest) = line.strip_prefix("pub async fn ") else {
                    continue;
                };
                let name = rest.split('(').next().unwrap();
                assert!(
                    suite.contains(&format!("{module}::{name},")),
                    "{module}::{name} is not in store_suite!"
                );
                cases += 1;
            }
        }
        assert!(cases >= 30, "only {cases} cases found");
    }
}
