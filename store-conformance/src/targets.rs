//! The queue's rules per issue or pull request: one running job at a
//! time, the newest request first, stops that run beside the job they
//! stop, cancellations that keep their cause.

use forgehand_store::{CancelCause, JobState};

use crate::fixtures::*;
use crate::Backend;

pub async fn the_database_refuses_a_second_running_job_for_one_target(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    enqueue(&*store, &[help(7), help(7)]).await;
    assert!(store.claim_job("a", LEASE).await.unwrap().is_some());
    assert!(store.claim_job("b", LEASE).await.unwrap().is_none());
}

pub async fn jobs_of_one_target_run_in_order_while_other_targets_proceed(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue(&*store, &[help(7), help(7), help(7), help(8)]).await;
    let first = claim(&*store).await.unwrap();
    let other = claim(&*store).await.unwrap();
    assert_eq!(
        (first.id, other.id),
        (ids[0], ids[3]),
        "issue 8 is not held up"
    );
    assert!(claim(&*store).await.is_none(), "issue 7 is busy");
    succeed(&*store, &other).await;
    assert!(claim(&*store).await.is_none(), "issue 7 is still busy");
    succeed(&*store, &first).await;
    let second = claim(&*store).await.unwrap();
    assert_eq!(second.id, ids[1], "in the order they came");
    succeed(&*store, &second).await;
    assert_eq!(claim(&*store).await.unwrap().id, ids[2]);
}

pub async fn the_newest_waiting_request_goes_first_and_supersedes_the_older_ones(
    backend: &dyn Backend,
) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let older = enqueue_labeled(&*store, &[7, 7]).await;
    let help = enqueue(&*store, &[help(7)]).await[0];
    let newest = enqueue_labeled(&*store, &[7]).await[0];
    let first = claim(&*store).await.unwrap();
    assert_eq!(first.id, help, "help is not work: it keeps its turn");
    assert!(claim(&*store).await.is_none(), "one running job per target");
    succeed(&*store, &first).await;
    assert_eq!(
        claim(&*store).await.map(|c| c.id),
        Some(newest),
        "the newest request, not the oldest"
    );
    // Its sender may command the bot: the pipeline supersedes the rest.
    let cancelled = store.supersede_waiting(&target_7(), newest).await.unwrap();
    assert_eq!(cancelled, older);
    let (state, _, error, runs) = state(&*store, older[0]).await;
    assert_eq!(state, JobState::Cancelled);
    assert_eq!(
        error,
        Some(format!("superseded by job {newest}, a newer request"))
    );
    assert!(runs.is_empty(), "a superseded job never ran");
    let history = store.target_history(&target_7(), 10).await.unwrap();
    let ids: Vec<JobId> = history.iter().map(|j| j.id).collect();
    assert_eq!(ids, [newest, help, older[1], older[0]], "newest first");
    assert_eq!(history[2].stopped_by, Some(newest));
    assert_eq!(history[0].job, labeled(7));
    let limited = store.target_history(&target_7(), 2).await.unwrap();
    assert_eq!(limited.len(), 2);
}

pub async fn a_stop_runs_beside_the_job_it_stops(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let running = enqueue_labeled(&*store, &[7]).await[0];
    assert_eq!(claim(&*store).await.map(|c| c.id), Some(running));
    let waiting = enqueue_labeled(&*store, &[7]).await[0];
    let stop_id = enqueue(&*store, &[stop(7)]).await[0];
    let newer = enqueue_labeled(&*store, &[7]).await[0];
    assert_eq!(
        claim(&*store).await.map(|c| c.id),
        Some(stop_id),
        "the stop is claimed while job {running} runs"
    );
    assert!(
        claim(&*store).await.is_none(),
        "the waiting work still waits"
    );
    assert_eq!(store.stop_requested(running).await.unwrap(), None);
    let stopped = store
        .request_stop(&target_7(), stop_id, "stopped by @maintainer")
        .await
        .unwrap();
    assert_eq!(stopped, [running, waiting], "running ones first");
    assert_eq!(
        state(&*store, newer).await.0,
        JobState::Queued,
        "a request made after the stop is not stopped"
    );
    assert_eq!(
        store.stop_requested(running).await.unwrap().as_deref(),
        Some("stopped by @maintainer")
    );
    let (state, _, error, _) = state(&*store, waiting).await;
    assert_eq!(state, JobState::Cancelled);
    assert_eq!(error.as_deref(), Some("stopped by @maintainer"));
}

/// A claim looks at the 32 oldest waiting jobs first; when all of them are
/// held back it looks target by target instead of walking every waiting
/// job. The rules are the same either way.
pub async fn behind_many_held_back_jobs_a_claim_still_finds_the_right_one(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let running = enqueue_labeled(&*store, &[7]).await[0];
    let first = claim(&*store).await.unwrap();
    assert_eq!(first.id, running);
    let held_back = enqueue_labeled(&*store, &[7; 40]).await;
    let other = enqueue_labeled(&*store, &[8]).await[0];
    let second = claim(&*store).await.unwrap();
    assert_eq!(
        second.id, other,
        "issue 8's job, behind 40 of issue 7 held back by job {running}"
    );
    let stop_id = enqueue(&*store, &[stop(7)]).await[0];
    let third = claim(&*store).await.unwrap();
    assert_eq!(third.id, stop_id, "the stop runs beside job {running}");
    assert!(
        claim(&*store).await.is_none(),
        "both issues have a running job"
    );

    for claimed in [first, second, third] {
        succeed(&*store, &claimed).await;
    }
    assert_eq!(
        claim(&*store).await.map(|c| c.id),
        Some(held_back[39]),
        "the newest of the 40 requests, not the oldest"
    );
    assert!(claim(&*store).await.is_none(), "the other 39 wait for it");
}

/// What cancelled a job is kept in its own column, whatever its error
/// text says: a newer request supersedes, a stop stops, also a running
/// job that ends cancelled.
pub async fn a_cancelled_job_keeps_its_cause(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let jobs = enqueue_labeled(&*store, &[7, 7, 7]).await;
    assert_eq!(
        store.supersede_waiting(&target_7(), jobs[1]).await.unwrap(),
        vec![jobs[0]]
    );
    assert_eq!(
        store
            .request_stop(&target_7(), JobId(jobs[2].get() + 1), "stopped by @m")
            .await
            .unwrap(),
        vec![jobs[1], jobs[2]]
    );
    let history = store.target_history(&target_7(), 10).await.unwrap();
    let cause = |id: JobId| history.iter().find(|j| j.id == id).unwrap().cancel_cause;
    assert_eq!(cause(jobs[0]), Some(CancelCause::Superseded));
    assert_eq!(cause(jobs[1]), Some(CancelCause::Stopped));
    assert_eq!(cause(jobs[2]), Some(CancelCause::Stopped));
    let listed = store.job(jobs[0]).await.unwrap().unwrap();
    assert_eq!(listed.job.cancel_cause, Some(CancelCause::Superseded));
    let shown = serde_json::to_value(&listed).unwrap();
    assert_eq!(shown["cancel_cause"], "superseded");
    assert_eq!(shown["kind"], "labeled");

    let running = enqueue_labeled(&*store, &[8]).await[0];
    let claimed = claim(&*store).await.unwrap();
    let cancelled = forgehand_store::Finish::Cancelled {
        reason: "stopped by @m".into(),
    };
    assert!(store.finish_job(&claimed, "w", cancelled).await.unwrap());
    let detail = store.job(running).await.unwrap().unwrap();
    assert_eq!(detail.job.state, JobState::Cancelled);
    assert_eq!(detail.job.cancel_cause, Some(CancelCause::Stopped));
    assert_eq!(
        detail.runs[0].outcome,
        Some(forgehand_store::RunOutcome::Cancelled)
    );
}
