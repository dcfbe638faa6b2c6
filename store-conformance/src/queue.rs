//! The queue's bookkeeping: claims with a lease, heartbeats, the end of
//! an attempt (success, retry with backoff, dead letter, release), and
//! the recovery of jobs whose worker died.

use std::time::Duration;

use forgehand_store::{Finish, JobState};

use crate::fixtures::*;
use crate::Backend;

pub async fn a_claim_takes_the_oldest_due_job_with_a_lease(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    assert!(claim(&*store).await.is_none(), "nothing waits");
    let ids = enqueue_labeled(&*store, &[1, 2]).await;
    let claimed = store
        .claim_job("worker-a", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (claimed.id, claimed.attempt, claimed.max_attempts),
        (ids[0], 1, 5)
    );
    assert_eq!(claimed.job, labeled(1));
    assert_eq!(claimed.last_error, None);
    let detail = store.job(ids[0]).await.unwrap().unwrap();
    assert_eq!(detail.job.state, JobState::Running);
    assert_eq!(detail.job.lease_owner.as_deref(), Some("worker-a"));
    let lease_end = detail.job.lease_expires_at.unwrap();
    assert!(lease_end >= now() + 50_000, "a lease of a minute");
    assert_eq!(detail.runs.len(), 1);
    assert_eq!(detail.runs[0].id, claimed.run);
    assert_eq!(detail.runs[0].worker, "worker-a");
    assert_eq!(detail.runs[0].outcome, None, "running");
    assert_eq!(claim(&*store).await.unwrap().id, ids[1]);
    assert!(claim(&*store).await.is_none());
}

pub async fn a_retry_waits_for_its_backoff(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1]).await;
    let claimed = claim(&*store).await.unwrap();
    let later = now() + 60_000;
    let retry = Finish::Retry {
        error: "e".into(),
        run_at: later,
    };
    assert!(store.finish_job(&claimed, "w", retry).await.unwrap());
    assert!(claim(&*store).await.is_none(), "not before run_at");
    let detail = store.job(ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (detail.job.state, detail.job.run_at),
        (JobState::Queued, later)
    );
    assert_eq!(detail.job.finished_at, None);
}

pub async fn retried_attempts_keep_their_runs_and_last_error(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1]).await;
    for attempt in 1..=2 {
        let claimed = claim(&*store).await.unwrap();
        assert_eq!(claimed.attempt, attempt);
        if attempt == 2 {
            assert_eq!(claimed.last_error.as_deref(), Some("forge unavailable"));
        }
        let retry = Finish::Retry {
            error: "forge unavailable".into(),
            run_at: now(),
        };
        assert!(store.finish_job(&claimed, "w", retry).await.unwrap());
    }
    let third = claim(&*store).await.unwrap();
    assert_eq!(third.attempt, 3);
    succeed(&*store, &third).await;
    let (state, attempts, last_error, runs) = state(&*store, ids[0]).await;
    assert_eq!((state, attempts), (JobState::Succeeded, 3));
    assert_eq!(runs, ["retry", "retry", "succeeded"]);
    assert_eq!(
        last_error.as_deref(),
        Some("forge unavailable"),
        "the last error is kept for operators"
    );
    let detail = store.job(ids[0]).await.unwrap().unwrap();
    assert!(detail.job.finished_at.is_some());
    assert_eq!(detail.runs[0].error.as_deref(), Some("forge unavailable"));
    assert_eq!(detail.job.lease_owner, None);
}

pub async fn the_last_failed_attempt_dead_letters_the_job(backend: &dyn Backend) {
    let opened = backend.open(1).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1]).await;
    let claimed = claim(&*store).await.unwrap();
    assert_eq!((claimed.attempt, claimed.max_attempts), (1, 1));
    let dead = Finish::Dead {
        error: "model endpoint refused the connection (attempt 1 of 1)".into(),
    };
    assert!(store.finish_job(&claimed, "w", dead).await.unwrap());
    let (state, attempts, last_error, runs) = state(&*store, ids[0]).await;
    assert_eq!((state, attempts), (JobState::Dead, 1));
    assert_eq!(runs, ["dead"]);
    assert_eq!(
        last_error.unwrap(),
        "model endpoint refused the connection (attempt 1 of 1)"
    );
    assert!(claim(&*store).await.is_none(), "a dead job is not run");
}

pub async fn a_permanent_failure_is_final(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1]).await;
    let claimed = claim(&*store).await.unwrap();
    let failed = Finish::Failed {
        error: "denied: the sender has no write access".into(),
    };
    assert!(store.finish_job(&claimed, "w", failed).await.unwrap());
    let (state, _, _, runs) = state(&*store, ids[0]).await;
    assert_eq!((state, runs), (JobState::Failed, vec!["failed".to_owned()]));
    assert!(claim(&*store).await.is_none());
}

pub async fn only_the_lease_owner_extends_or_ends_an_attempt(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1]).await;
    let claimed = store.claim_job("owner", LEASE).await.unwrap().unwrap();
    assert!(!store.heartbeat(&claimed, "thief", LEASE).await.unwrap());
    let before = store
        .job(ids[0])
        .await
        .unwrap()
        .unwrap()
        .job
        .lease_expires_at;
    assert!(store
        .heartbeat(&claimed, "owner", Duration::from_secs(3600))
        .await
        .unwrap());
    let after = store
        .job(ids[0])
        .await
        .unwrap()
        .unwrap()
        .job
        .lease_expires_at;
    assert!(after > before, "{after:?} after {before:?}");
    let failed = Finish::Failed {
        error: "late".into(),
    };
    assert!(!store.finish_job(&claimed, "thief", failed).await.unwrap());
    assert_eq!(state(&*store, ids[0]).await.0, JobState::Running);
    let done = Finish::Succeeded {
        result: serde_json::json!({}),
    };
    assert!(store.finish_job(&claimed, "owner", done).await.unwrap());
    assert!(
        !store.heartbeat(&claimed, "owner", LEASE).await.unwrap(),
        "a finished job has no lease"
    );
}

pub async fn an_expired_lease_returns_the_job_to_the_queue(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1]).await;
    // A worker claims and then "dies": it never heartbeats or finishes.
    let ghost = store.claim_job("ghost", LEASE).await.unwrap().unwrap();
    let recovered = store.recover_expired_leases().await.unwrap();
    assert_eq!(
        (recovered.requeued, recovered.dead.len()),
        (0, 0),
        "not before the lease runs out"
    );
    expire(&*store, &ghost, "ghost").await;
    let recovered = store.recover_expired_leases().await.unwrap();
    assert_eq!((recovered.requeued, recovered.dead.len()), (1, 0));
    let next = claim(&*store).await.unwrap();
    assert_eq!((next.id, next.attempt), (ids[0], 2));
    succeed(&*store, &next).await;
    let (state, attempts, last_error, runs) = state(&*store, ids[0]).await;
    assert_eq!((state, attempts), (JobState::Succeeded, 2));
    assert_eq!(runs, ["lost", "succeeded"]);
    assert!(last_error
        .unwrap()
        .contains("lease expired: the worker stopped heartbeating"));
    // The ghost coming back to life cannot overwrite the result.
    let late = Finish::Failed {
        error: "late".into(),
    };
    assert!(!store.finish_job(&ghost, "ghost", late).await.unwrap());
    assert_eq!(state_of(&*store, ids[0]).await, JobState::Succeeded);
}

async fn state_of(store: &dyn forgehand_store::Store, id: JobId) -> JobState {
    state(store, id).await.0
}

pub async fn an_expired_lease_on_the_last_attempt_dead_letters(backend: &dyn Backend) {
    let opened = backend.open(2).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1]).await;
    let first = claim(&*store).await.unwrap();
    let retry = Finish::Retry {
        error: "the forge said 502".into(),
        run_at: now(),
    };
    assert!(store.finish_job(&first, "w", retry).await.unwrap());
    let ghost = store.claim_job("ghost", LEASE).await.unwrap().unwrap();
    expire(&*store, &ghost, "ghost").await;
    let recovered = store.recover_expired_leases().await.unwrap();
    assert_eq!(recovered.requeued, 0);
    let dead: Vec<_> = recovered
        .dead
        .iter()
        .map(|j| {
            (
                j.id,
                j.run,
                j.attempt,
                j.max_attempts,
                j.last_error.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        dead,
        [(ids[0], ghost.run, 2, 2, Some("the forge said 502"))],
        "as it was claimed last"
    );
    assert_eq!(recovered.dead[0].job, labeled(1));
    let (state, _, last_error, runs) = state(&*store, ids[0]).await;
    assert_eq!(state, JobState::Dead);
    assert_eq!(runs, ["retry", "lost"]);
    assert!(last_error
        .unwrap()
        .contains("lease expired: the worker stopped heartbeating"));
    assert!(store
        .job(ids[0])
        .await
        .unwrap()
        .unwrap()
        .job
        .finished_at
        .is_some());
    assert!(store
        .recover_expired_leases()
        .await
        .unwrap()
        .dead
        .is_empty());
}

/// Every worker node runs a reaper: two at the same moment must hand a
/// dead job's last word to one of them only.
pub async fn concurrent_reapers_dead_letter_a_job_once(backend: &dyn Backend) {
    let opened = backend.open(1).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1, 2, 3, 4]).await;
    for _ in &ids {
        let ghost = store.claim_job("ghost", LEASE).await.unwrap().unwrap();
        expire(&*store, &ghost, "ghost").await;
    }
    let reapers: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.recover_expired_leases().await.unwrap() })
        })
        .collect();
    let mut dead = Vec::new();
    for reaper in reapers {
        let recovered = reaper.await.unwrap();
        assert_eq!(recovered.requeued, 0);
        dead.extend(recovered.dead.into_iter().map(|j| j.id));
    }
    dead.sort();
    assert_eq!(dead, ids, "each dead job reported exactly once");
    assert_eq!(count(&*store, JobState::Dead).await, 4);
}

pub async fn a_released_job_does_not_count_the_attempt(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1]).await;
    let claimed = claim(&*store).await.unwrap();
    assert!(store
        .finish_job(&claimed, "w", Finish::Released)
        .await
        .unwrap());
    let (state, attempts, _, runs) = state(&*store, ids[0]).await;
    assert_eq!(
        (state, attempts),
        (JobState::Queued, 0),
        "released, and the attempt does not count"
    );
    assert_eq!(runs, ["released"]);
    // Another node picks it up at once.
    let next = store.claim_job("other", LEASE).await.unwrap().unwrap();
    assert_eq!((next.id, next.attempt), (ids[0], 1));
}

/// Claimers racing for the same candidates must get each job exactly
/// once, and never two of one target.
pub async fn racing_claimers_get_each_job_once(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let targets: Vec<u64> = (1..=30).collect();
    let mut expected = enqueue_labeled(&*store, &targets).await;
    // A second job for each target waits behind the first.
    let helps: Vec<_> = targets.iter().map(|&t| help(t)).collect();
    enqueue(&*store, &helps).await;
    let claimers: Vec<_> = (0..6)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                // A claim that lost every race returns none while jobs
                // still wait: look until one finds nothing twice.
                let mut empty = 0;
                while empty < 2 {
                    match store.claim_job(&format!("w{n}"), LEASE).await.unwrap() {
                        Some(job) => {
                            empty = 0;
                            got.push(job.id);
                        }
                        None => empty += 1,
                    }
                }
                got
            })
        })
        .collect();
    let mut claimed = Vec::new();
    for claimer in claimers {
        claimed.extend(claimer.await.unwrap());
    }
    claimed.sort();
    expected.sort();
    assert_eq!(
        claimed, expected,
        "each target's first job, each exactly once"
    );
    assert_eq!(count(&*store, JobState::Running).await, 30);
    assert_eq!(count(&*store, JobState::Queued).await, 30);
}

pub async fn a_result_is_kept_as_json(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = enqueue_labeled(&*store, &[1, 2]).await;
    let first = claim(&*store).await.unwrap();
    let done = Finish::Succeeded {
        result: serde_json::json!({"outcome": "succeeded", "pr": 12}),
    };
    assert!(store.finish_job(&first, "w", done).await.unwrap());
    let second = claim(&*store).await.unwrap();
    // What a job did before it failed is kept like a success's result.
    let steps = serde_json::json!({"steps": ["authorize"], "reason": "denied"});
    store.record_result(second.id, &steps).await.unwrap();
    let failed = Finish::Failed {
        error: "denied".into(),
    };
    assert!(store.finish_job(&second, "w", failed).await.unwrap());
    let kept = |id| {
        let store = store.clone();
        async move { store.job(id).await.unwrap().unwrap().job.result }
    };
    assert_eq!(
        kept(ids[0]).await,
        Some(serde_json::json!({"outcome": "succeeded", "pr": 12}))
    );
    assert_eq!(kept(ids[1]).await, Some(steps.clone()));
    let history = store
        .target_history(&labeled(2).target_key(), 5)
        .await
        .unwrap();
    assert_eq!(history[0].result, Some(steps));
    assert_eq!(history[0].error.as_deref(), Some("denied"));
}

/// What /metrics shows follows every change of state.
pub async fn job_counts_follow_every_change(backend: &dyn Backend) {
    let opened = backend.open(1).await;
    let store = opened.store.clone();
    let counts = || {
        let store = store.clone();
        async move {
            let counted = store.job_counts().await.unwrap();
            assert_eq!(
                counted.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
                JobState::ALL,
                "every state, in order"
            );
            counted.into_iter().map(|(_, n)| n).collect::<Vec<_>>()
        }
    };
    // queued, running, succeeded, failed, dead, cancelled
    assert_eq!(counts().await, [0, 0, 0, 0, 0, 0]);
    let ids = enqueue_labeled(&*store, &[1, 2, 3, 4, 5]).await;
    assert_eq!(counts().await, [5, 0, 0, 0, 0, 0]);
    let a = claim(&*store).await.unwrap();
    let b = claim(&*store).await.unwrap();
    let c = claim(&*store).await.unwrap();
    assert_eq!(counts().await, [2, 3, 0, 0, 0, 0]);
    succeed(&*store, &a).await;
    let failed = Finish::Failed { error: "e".into() };
    assert!(store.finish_job(&b, "w", failed).await.unwrap());
    expire(&*store, &c, "w").await;
    assert_eq!(store.recover_expired_leases().await.unwrap().dead.len(), 1);
    assert_eq!(counts().await, [2, 0, 1, 1, 1, 0]);
    let newer = enqueue_labeled(&*store, &[5]).await[0];
    assert_eq!(
        store
            .supersede_waiting(&labeled(5).target_key(), newer)
            .await
            .unwrap(),
        [ids[4]]
    );
    assert_eq!(counts().await, [2, 0, 1, 1, 1, 1]);
    let later = now() + DAY;
    let pruned = store
        .prune(&forgehand_store::Retention {
            deliveries_before: 0,
            refused_before: 0,
            jobs_before: later,
            digests_before: 0,
        })
        .await
        .unwrap();
    assert_eq!(pruned.jobs, 4);
    assert_eq!(counts().await, [2, 0, 0, 0, 0, 0]);
}
