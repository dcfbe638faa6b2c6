//! The durable queue against a real SQLite file (and PostgreSQL, with
//! FORGEHAND_TEST_STORE=postgres): running, retries with
//! backoff, dead letters, panics, leases and heartbeats, graceful shutdown.
//! The rules per target (one running job, newest request first, stops) are
//! in queue_targets.rs.

mod queue_support;

use queue_support::*;

#[tokio::test]
async fn a_job_runs_once_and_succeeds() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let handler = Scripted::new(|_| Step::Succeed);
    let pool = q.pool(handler.clone(), 2, 2000, 1000);
    q.wait_for(ids[0], JobState::Succeeded).await;
    pool.shutdown().await;
    assert_eq!(*handler.ran.lock().unwrap(), [(ids[0], 1)]);
    let (_, attempts, _, runs) = q.state(ids[0]).await;
    assert_eq!((attempts, runs), (1, vec!["succeeded".to_string()]));
}

#[tokio::test]
async fn retryable_failures_back_off_then_succeed() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let handler = Scripted::new(|job| {
        if job.attempt < 3 {
            Step::Retry("forge unavailable")
        } else {
            Step::Succeed
        }
    });
    let pool = q.pool(handler.clone(), 1, 2000, 1000);
    q.wait_for(ids[0], JobState::Succeeded).await;
    pool.shutdown().await;
    let (_, attempts, last_error, runs) = q.state(ids[0]).await;
    assert_eq!(attempts, 3);
    assert_eq!(runs, ["retry", "retry", "succeeded"]);
    assert_eq!(
        last_error.as_deref(),
        Some("forge unavailable"),
        "the last error is kept for operators"
    );
}

#[tokio::test]
async fn a_retry_waits_for_its_backoff() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let claimed = q
        .store
        .claim_job("w", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    let later = forgehand_store::time::now_ms() + 60_000;
    assert!(q
        .store
        .finish_job(
            &claimed,
            "w",
            Finish::Retry {
                error: "e".into(),
                run_at: later
            }
        )
        .await
        .unwrap());
    assert!(
        q.store
            .claim_job("w", Duration::from_secs(10))
            .await
            .unwrap()
            .is_none(),
        "not before run_at"
    );
    assert_eq!(q.state(ids[0]).await.0, JobState::Queued);
}

#[tokio::test]
async fn the_last_failed_attempt_dead_letters_the_job_with_its_error() {
    let q = queue(3).await;
    let ids = q.enqueue(&[1]).await;
    let handler = Scripted::new(|_| Step::Retry("model endpoint refused the connection"));
    let pool = q.pool(handler.clone(), 1, 2000, 1000);
    q.wait_for(ids[0], JobState::Dead).await;
    pool.shutdown().await;
    let (_, attempts, last_error, runs) = q.state(ids[0]).await;
    assert_eq!(attempts, 3);
    assert_eq!(runs, ["retry", "retry", "dead"]);
    assert_eq!(
        last_error.unwrap(),
        "model endpoint refused the connection (attempt 3 of 3)"
    );
    assert_eq!(handler.ran.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_permanent_failure_is_not_retried() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let handler = Scripted::new(|_| Step::Permanent("denied: the sender has no write access"));
    let pool = q.pool(handler.clone(), 1, 2000, 1000);
    q.wait_for(ids[0], JobState::Failed).await;
    pool.shutdown().await;
    assert_eq!(handler.ran.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_panicking_handler_fails_its_job_not_the_worker() {
    let q = queue(2).await;
    let ids = q.enqueue(&[1, 2]).await;
    let first = ids[0];
    let handler = Scripted::new(move |job| {
        if job.id == first {
            Step::Panic
        } else {
            Step::Succeed
        }
    });
    let pool = q.pool(handler.clone(), 1, 2000, 1000);
    q.wait_for(ids[0], JobState::Dead).await;
    q.wait_for(ids[1], JobState::Succeeded).await;
    pool.shutdown().await;
    let (_, _, last_error, _) = q.state(ids[0]).await;
    assert!(last_error
        .unwrap()
        .contains("panicked: the handler blew up"));
}

/// The job runs until the other node's reaper has looked twice after the
/// job's first lease ran out: only the heartbeats kept it. The lease is
/// 3 s, renewed every second: a worker held up for two seconds (a loaded
/// machine) still keeps it.
#[tokio::test]
async fn heartbeats_keep_a_long_job_from_being_taken_over() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let done = Arc::new(Notify::new());
    let handler = Scripted::new({
        let done = done.clone();
        move |_| Step::Until(done.clone())
    });
    let pool = q.pool(handler.clone(), 1, 3000, 5000);
    q.wait_for(ids[0], JobState::Running).await;
    // Claimed before now: its first lease ends before this.
    let first_lease_end = forgehand_store::time::now_ms() + 3000;
    // Another node, whose reaper (every half second) would take over an
    // expired lease.
    let thief_handler = Scripted::new(|_| Step::Succeed);
    let thief_store = CountingReaps::wrap(q.store.clone());
    let thief = pool_on(thief_store.clone(), thief_handler.clone(), 1, 1000, 5000);
    // The first lease has run out by the store's clock...
    until("the first lease's end", || {
        forgehand_store::time::now_ms() > first_lease_end
    })
    .await;
    // ...and the reaper has looked since.
    let reaps = thief_store.reaps();
    until("two passes of the other node's reaper", || {
        thief_store.reaps() >= reaps + 2
    })
    .await;
    assert_eq!(q.state(ids[0]).await.0, JobState::Running);
    done.notify_one();
    q.wait_for(ids[0], JobState::Succeeded).await;
    pool.shutdown().await;
    thief.shutdown().await;
    let (_, attempts, _, runs) = q.state(ids[0]).await;
    assert_eq!((attempts, runs), (1, vec!["succeeded".to_string()]));
    assert_eq!(
        handler.ran.lock().unwrap().len(),
        1,
        "the long job ran to its end"
    );
    assert!(
        thief_handler.ran.lock().unwrap().is_empty(),
        "the other node never took it"
    );
}

#[tokio::test]
async fn a_crashed_workers_lease_expires_and_the_job_runs_again() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    // A worker claims...
    let ghost = q
        .store
        .claim_job("ghost", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ghost.id, ids[0]);
    assert_eq!(
        q.store.recover_expired_leases().await.unwrap().requeued,
        0,
        "not before the lease runs out"
    );
    // ...renews its lease for a second, and then "dies": it never
    // heartbeats or finishes again. No waiting here: the pool's reaper
    // (every second) gives the job back once that second is over.
    assert!(q
        .store
        .heartbeat(&ghost, "ghost", Duration::from_millis(1000))
        .await
        .unwrap());
    let handler = Scripted::new(|_| Step::Succeed);
    let pool = q.pool(handler.clone(), 1, 2000, 1000);
    q.wait_for(ids[0], JobState::Succeeded).await;
    pool.shutdown().await;
    let (_, attempts, last_error, runs) = q.state(ids[0]).await;
    assert_eq!(attempts, 2);
    assert_eq!(runs, ["lost", "succeeded"]);
    assert!(last_error
        .unwrap()
        .contains("lease expired: the worker stopped heartbeating"));
    // The ghost coming back to life cannot overwrite the result.
    assert!(!q
        .store
        .finish_job(
            &ghost,
            "ghost",
            Finish::Failed {
                error: "late".into()
            }
        )
        .await
        .unwrap());
    assert_eq!(q.state(ids[0]).await.0, JobState::Succeeded);
}

#[tokio::test]
async fn an_expired_lease_on_the_last_attempt_dead_letters() {
    let q = queue(1).await;
    let ids = q.enqueue(&[1]).await;
    q.store
        .claim_job("ghost", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    // The lease ends 50 ms after the claim by the store's clock: wait
    // until that clock is past it.
    let lease_end = forgehand_store::time::now_ms() + 50;
    until("the lease's end", || {
        forgehand_store::time::now_ms() > lease_end
    })
    .await;
    let recovered = q.store.recover_expired_leases().await.unwrap();
    assert_eq!(recovered.requeued, 0);
    let dead: Vec<(JobId, u32, u32)> = recovered
        .dead
        .iter()
        .map(|j| (j.id, j.attempt, j.max_attempts))
        .collect();
    assert_eq!(dead, [(ids[0], 1, 1)]);
    assert_eq!(q.state(ids[0]).await.0, JobState::Dead);
}

/// The handler gets its last word about a job that died with its worker
/// (the pipeline edits the status comment), once.
#[tokio::test]
async fn a_job_dead_lettered_by_the_reaper_is_handed_to_its_handler_once() {
    let q = queue(1).await;
    let ids = q.enqueue(&[1]).await;
    q.store
        .claim_job("ghost", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    let handler = Scripted::new(|_| Step::Succeed);
    let store = CountingReaps::wrap(q.store.clone());
    let pool = pool_on(store.clone(), handler.clone(), 1, 200, 1000);
    q.wait_for(ids[0], JobState::Dead).await;
    until("the handover of the dead job", || {
        !handler.dead_lettered.lock().unwrap().is_empty()
    })
    .await;
    // Two more passes of the reaper after the one that handed it over: a
    // second handover would come from one of them.
    let reaps = store.reaps();
    until("two more passes of the reaper", || {
        store.reaps() >= reaps + 2
    })
    .await;
    pool.shutdown().await;
    let dead = handler.dead_lettered.lock().unwrap().clone();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].0, ids[0]);
    assert!(dead[0].1.contains("last attempt (1 of 1)"), "{}", dead[0].1);
    assert!(
        handler.ran.lock().unwrap().is_empty(),
        "a dead job is not run"
    );
}

#[tokio::test]
async fn shutdown_lets_running_jobs_finish_within_the_grace_period() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let handler = Scripted::new(|_| Step::Sleep(Duration::from_millis(200)));
    // A grace far longer than the job, however slow the machine: a
    // shutdown that did not wait would release the job at once.
    let pool = q.pool(handler.clone(), 1, 2000, HANG.as_millis() as u64);
    q.wait_for(ids[0], JobState::Running).await;
    pool.shutdown().await;
    assert_eq!(q.state(ids[0]).await.0, JobState::Succeeded);
}

#[tokio::test]
async fn shutdown_releases_jobs_that_outlast_the_grace_period() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1, 2]).await;
    let handler = Scripted::new(|_| Step::Sleep(Duration::from_secs(30)));
    let pool = q.pool(handler.clone(), 1, 2000, 100);
    q.wait_for(ids[0], JobState::Running).await;
    pool.shutdown().await;
    let (state, attempts, _, runs) = q.state(ids[0]).await;
    assert_eq!(
        (state, attempts),
        (JobState::Queued, 0),
        "released, and the attempt does not count"
    );
    assert_eq!(runs, ["released"]);
    assert_eq!(
        q.state(ids[1]).await.0,
        JobState::Queued,
        "nothing new is claimed while stopping"
    );
    // Another node picks it up at once.
    let next = q
        .store
        .claim_job("other", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((next.id, next.attempt), (ids[0], 1));
}

#[tokio::test]
async fn the_handlers_result_is_kept_as_json() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let pool = q.pool(Scripted::new(|_| Step::Succeed), 1, 2000, 1000);
    q.wait_for(ids[0], JobState::Succeeded).await;
    pool.shutdown().await;
    let detail = q.store.job(ids[0]).await.unwrap().unwrap();
    assert_eq!(
        detail.job.result,
        Some(serde_json::json!({"outcome": "succeeded"}))
    );
}

/// Claiming looks for a candidate outside the write lock, then takes it
/// under the lock: claimers racing for the same candidates must still get
/// each job exactly once, and never two of one target.
#[tokio::test]
async fn racing_claimers_get_each_job_once() {
    let q = queue(5).await;
    let targets: Vec<u64> = (1..=30).collect();
    let mut expected = q.enqueue(&targets).await;
    // A second job for each target waits behind the first.
    q.enqueue_jobs(targets.iter().map(|&t| help(t)).collect())
        .await;
    let claimers = (0..6).map(|n| {
        let store = q.store.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(job) = store
                .claim_job(&format!("w{n}"), Duration::from_secs(30))
                .await
                .unwrap()
            {
                got.push((job.id, job.job.target));
            }
            got
        })
    });
    let mut claimed = Vec::new();
    for claimer in claimers {
        claimed.extend(claimer.await.unwrap());
    }
    let mut ids: Vec<JobId> = claimed.iter().map(|(id, _)| *id).collect();
    ids.sort();
    expected.sort();
    assert_eq!(ids, expected, "each target's first job, each exactly once");
}
