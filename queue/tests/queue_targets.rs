//! The queue's rules per issue or pull request, against a real SQLite
//! file: one running job at a time, the newest request first, stops that
//! run beside the job they stop.

mod queue_support;

use queue_support::*;

#[tokio::test]
async fn one_job_at_a_time_per_issue_while_other_issues_proceed() {
    let q = queue(5).await;
    let ids = q
        .enqueue_jobs(vec![help(7), help(7), help(7), help(8)])
        .await;
    let handler = Scripted::new(|job| {
        if job.job.target == 7 {
            Step::Sleep(Duration::from_millis(400))
        } else {
            Step::Succeed
        }
    });
    let pool = q.pool(handler.clone(), 4, 5000, 5000);
    q.wait_for(ids[3], JobState::Succeeded).await;
    assert_ne!(
        q.state(ids[2]).await.0,
        JobState::Succeeded,
        "issue 8 finished while issue 7 was still busy"
    );
    for id in &ids[..3] {
        q.wait_for(*id, JobState::Succeeded).await;
    }
    pool.shutdown().await;
    let ran = handler.ran.lock().unwrap().clone();
    let order: Vec<JobId> = ran
        .iter()
        .filter(|(id, _)| ids[..3].contains(id))
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(
        order,
        ids[..3],
        "jobs of one issue run in the order they came"
    );
    assert!(
        handler.max_concurrent.load(Ordering::SeqCst) <= 2,
        "at most issue 7's and issue 8's jobs together"
    );
}

#[tokio::test]
async fn the_database_refuses_a_second_running_job_for_one_target() {
    let q = queue(5).await;
    q.enqueue_jobs(vec![help(7), help(7)]).await;
    let first = q
        .store
        .claim_job("a", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(first.is_some());
    assert!(q
        .store
        .claim_job("b", Duration::from_secs(30))
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn the_newest_waiting_request_goes_first_and_supersedes_the_older_ones() {
    let q = queue(5).await;
    let older = q.enqueue(&[7, 7]).await;
    let help = q.enqueue_jobs(vec![help(7)]).await[0];
    let newest = q.enqueue(&[7]).await[0];
    let first = claim(&q).await.unwrap();
    assert_eq!(first.id, help, "help is not work: it keeps its turn");
    assert!(claim(&q).await.is_none(), "one running job per target");
    let done = Finish::Succeeded {
        result: serde_json::json!({}),
    };
    assert!(q.store.finish_job(&first, "w", done).await.unwrap());
    assert_eq!(
        claim(&q).await.map(|c| c.id),
        Some(newest),
        "the newest request, not the oldest"
    );
    // Its sender may command the bot: the pipeline supersedes the rest.
    let cancelled = q
        .store
        .supersede_waiting(&job(7).target_key(), newest)
        .await
        .unwrap();
    assert_eq!(cancelled, older);
    let (state, _, error, runs) = q.state(older[0]).await;
    assert_eq!(state, JobState::Cancelled);
    assert_eq!(
        error,
        Some(format!("superseded by job {newest}, a newer request"))
    );
    assert!(runs.is_empty(), "a superseded job never ran");
    let history = q
        .store
        .target_history(&job(7).target_key(), 10)
        .await
        .unwrap();
    let ids: Vec<JobId> = history.iter().map(|j| j.id).collect();
    assert_eq!(ids, [newest, help, older[1], older[0]], "newest first");
    assert_eq!(history[2].stopped_by, Some(newest));
}

#[tokio::test]
async fn a_stop_runs_beside_the_job_it_stops() {
    let q = queue(5).await;
    let running = q.enqueue(&[7]).await[0];
    assert_eq!(claim(&q).await.map(|c| c.id), Some(running));
    let waiting = q.enqueue(&[7]).await[0];
    let stop_id = q.enqueue_jobs(vec![stop(7)]).await[0];
    let newer = q.enqueue(&[7]).await[0];
    assert_eq!(
        claim(&q).await.map(|c| c.id),
        Some(stop_id),
        "the stop is claimed while job {running} runs"
    );
    assert!(claim(&q).await.is_none(), "the waiting work still waits");
    let stopped = q
        .store
        .request_stop(&job(7).target_key(), stop_id, "stopped by @maintainer")
        .await
        .unwrap();
    assert_eq!(stopped, [running, waiting]);
    assert_eq!(
        q.state(newer).await.0,
        JobState::Queued,
        "a request made after the stop is not stopped"
    );
    assert_eq!(
        q.store.stop_requested(running).await.unwrap().as_deref(),
        Some("stopped by @maintainer")
    );
    let (state, _, error, _) = q.state(waiting).await;
    assert_eq!(state, JobState::Cancelled);
    assert_eq!(error.as_deref(), Some("stopped by @maintainer"));
}

/// A claim looks at the 32 oldest waiting jobs first; when all of them are
/// held back it looks target by target instead of walking every waiting
/// job. The rules are the same either way.
#[tokio::test]
async fn behind_many_held_back_jobs_a_claim_still_finds_the_right_one() {
    let q = queue(5).await;
    let running = q.enqueue(&[7]).await[0];
    let first = claim(&q).await.unwrap();
    assert_eq!(first.id, running);
    let held_back = q.enqueue(&[7; 40]).await;
    let other = q.enqueue(&[8]).await[0];
    let second = claim(&q).await.unwrap();
    assert_eq!(
        second.id, other,
        "issue 8's job, behind 40 of issue 7 held back by job {running}"
    );
    let stop_id = q.enqueue_jobs(vec![stop(7)]).await[0];
    let third = claim(&q).await.unwrap();
    assert_eq!(third.id, stop_id, "the stop runs beside job {running}");
    assert!(claim(&q).await.is_none(), "both issues have a running job");

    for claimed in [first, second, third] {
        let done = Finish::Succeeded {
            result: serde_json::json!({}),
        };
        assert!(q.store.finish_job(&claimed, "w", done).await.unwrap());
    }
    assert_eq!(
        claim(&q).await.map(|c| c.id),
        Some(held_back[39]),
        "the newest of the 40 requests, not the oldest"
    );
    assert!(claim(&q).await.is_none(), "the other 39 wait for it");
}

/// The jobs would run for an hour: the stop request, which the worker
/// polls for, is the only way the job ends while the test waits (its wait
/// is a hang detector). How soon it ends is the poll interval's business,
/// not asserted.
#[tokio::test]
async fn a_running_job_asked_to_stop_is_cancelled_within_a_poll() {
    let q = queue(5).await;
    let ids = q.enqueue(&[7, 8]).await;
    let handler = Scripted::new(|_| Step::Sleep(Duration::from_secs(3600)));
    let pool = q.pool(handler.clone(), 2, 5000, 5000);
    q.wait_for(ids[0], JobState::Running).await;
    q.wait_for(ids[1], JobState::Running).await;
    let stopped = q
        .store
        .request_stop(&job(7).target_key(), JobId(999), "stopped by @maintainer")
        .await
        .unwrap();
    assert_eq!(stopped, [ids[0]]);
    q.wait_for(ids[0], JobState::Cancelled).await;
    let (_, _, error, runs) = q.state(ids[0]).await;
    assert_eq!(error.as_deref(), Some("stopped by @maintainer"));
    assert_eq!(runs, ["cancelled"]);
    assert_eq!(
        q.state(ids[1]).await.0,
        JobState::Running,
        "another issue's job is not touched"
    );
    pool.shutdown().await;
}
