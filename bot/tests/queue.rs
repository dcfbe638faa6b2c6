//! The durable queue against a real SQLite file: claiming, leases,
//! heartbeats, retries, dead letters, one running job per target, panics
//! and graceful shutdown.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use forgehand_bot::job::{Job, JobCommand, Task};
use forgehand_bot::queue::{Backoff, JobContext, JobError, JobHandler, QueueSettings, WorkerPool};
use forgehand_bot::store::{
    ClaimedJob, CompressedPayload, Finish, JobState, NewDelivery, Outcome, Recorded, SqliteStore,
    Store,
};
use forgehand_forge::{ForgeKind, Repo};
use tokio::sync::Notify;

struct Queue {
    store: Arc<dyn Store>,
    _dir: tempfile::TempDir,
}

async fn queue(max_attempts: u32) -> Queue {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("q.db").display());
    let store = SqliteStore::connect(&url)
        .await
        .unwrap()
        .with_max_attempts(max_attempts);
    Queue {
        store: Arc::new(store),
        _dir: dir,
    }
}

/// A job that supersedes nothing, so several can wait for one target.
fn help(target: u64) -> Job {
    Job {
        task: Task::Command {
            command: JobCommand::Help,
            comment_id: 1,
        },
        ..job(target)
    }
}

fn job(target: u64) -> Job {
    Job {
        forge: ForgeKind::Github,
        repo: Repo {
            owner: "acme".into(),
            name: "widgets".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        },
        target,
        on_pull_request: false,
        requested_by: "maintainer".into(),
        task: Task::Labeled {
            label: "forgehand".into(),
        },
    }
}

impl Queue {
    async fn enqueue(&self, targets: &[u64]) -> Vec<i64> {
        self.enqueue_jobs(targets.iter().map(|&t| job(t)).collect())
            .await
    }

    async fn enqueue_jobs(&self, jobs: Vec<Job>) -> Vec<i64> {
        let mut ids = Vec::new();
        for job in jobs {
            let target = job.target;
            let delivery = NewDelivery {
                forge: "github".into(),
                delivery_id: Some(uuid()),
                event: Some("issues".into()),
                event_name: Some("issues.labeled".into()),
                outcome: Outcome::Accepted,
                status_code: 202,
                reason: None,
                repo: Some("acme/widgets".into()),
                target: Some(target),
                sender: Some("maintainer".into()),
                detail: None,
                payload: Some(CompressedPayload::compress(b"{}")),
                jobs: vec![(&job).into()],
                installation: None,
                received_at: forgehand_bot::time::now_ms(),
            };
            match self
                .store
                .record_deliveries(&[delivery])
                .await
                .unwrap()
                .remove(0)
            {
                Recorded::New { jobs, .. } => ids.extend(jobs),
                other => panic!("{other:?}"),
            }
        }
        ids
    }

    async fn state(&self, id: i64) -> (JobState, i64, Option<String>, Vec<String>) {
        let detail = self.store.job(id).await.unwrap().unwrap();
        let runs = detail
            .runs
            .iter()
            .map(|r| r.outcome.clone().unwrap_or_else(|| "running".into()))
            .collect();
        (
            detail.job.state,
            detail.job.attempts,
            detail.job.last_error,
            runs,
        )
    }

    async fn wait_for(&self, id: i64, state: JobState) {
        for _ in 0..1500 {
            if self.state(id).await.0 == state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "job {id} never reached {state:?}: {:?}",
            self.state(id).await
        );
    }

    fn pool(
        &self,
        handler: Arc<dyn JobHandler>,
        workers: usize,
        lease_ms: u64,
        grace_ms: u64,
    ) -> WorkerPool {
        WorkerPool::start(
            self.store.clone(),
            handler,
            QueueSettings {
                workers,
                lease: Duration::from_millis(lease_ms),
                poll_interval: Duration::from_millis(20),
                backoff: Backoff {
                    base: Duration::from_millis(30),
                    max: Duration::from_millis(100),
                },
                shutdown_grace: Duration::from_millis(grace_ms),
            },
            Arc::new(Notify::new()),
        )
    }
}

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A handler whose behaviour per attempt is scripted, and which records
/// what it ran.
struct Scripted {
    script: Box<dyn Fn(&ClaimedJob) -> Step + Send + Sync>,
    ran: Mutex<Vec<(i64, u32)>>,
    running: AtomicU32,
    max_concurrent: AtomicU32,
}

enum Step {
    Succeed,
    Sleep(Duration),
    Retry(&'static str),
    Permanent(&'static str),
    Panic,
}

impl Scripted {
    fn new(script: impl Fn(&ClaimedJob) -> Step + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Scripted {
            script: Box::new(script),
            ran: Mutex::new(Vec::new()),
            running: AtomicU32::new(0),
            max_concurrent: AtomicU32::new(0),
        })
    }
}

#[async_trait]
impl JobHandler for Scripted {
    async fn run(&self, job: &ClaimedJob, cx: JobContext) -> Result<serde_json::Value, JobError> {
        self.ran.lock().unwrap().push((job.id, job.attempt));
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_concurrent.fetch_max(now, Ordering::SeqCst);
        let step = (self.script)(job);
        let result = match step {
            Step::Succeed => Ok(serde_json::json!({"ok": true})),
            Step::Sleep(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => Ok(serde_json::json!({"slept_ms": d.as_millis() as u64})),
                    _ = cx.cancel.cancelled() => Err(JobError::Cancelled("asked to stop".into())),
                }
            }
            Step::Retry(e) => Err(JobError::retryable(e)),
            Step::Permanent(e) => Err(JobError::permanent(e)),
            Step::Panic => {
                self.running.fetch_sub(1, Ordering::SeqCst);
                panic!("the handler blew up");
            }
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

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
    let later = forgehand_bot::time::now_ms() + 60_000;
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
    let order: Vec<i64> = ran
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
async fn heartbeats_keep_a_long_job_from_being_taken_over() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let handler = Scripted::new(|_| Step::Sleep(Duration::from_millis(3000)));
    // The lease is 1 s; the job takes three times that.
    let pool = q.pool(handler.clone(), 1, 1000, 5000);
    q.wait_for(ids[0], JobState::Running).await;
    // Another node, whose reaper would take over an expired lease.
    let thief_handler = Scripted::new(|_| Step::Succeed);
    let thief = q.pool(thief_handler.clone(), 1, 1000, 5000);
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
    // A worker claims and then "dies": it never heartbeats or finishes.
    let ghost = q
        .store
        .claim_job("ghost", Duration::from_millis(1000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ghost.id, ids[0]);
    assert_eq!(
        q.store.recover_expired_leases().await.unwrap(),
        0,
        "not before the lease runs out"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let handler = Scripted::new(|_| Step::Succeed);
    let pool = q.pool(handler.clone(), 1, 2000, 1000);
    q.wait_for(ids[0], JobState::Succeeded).await;
    pool.shutdown().await;
    let (_, attempts, last_error, runs) = q.state(ids[0]).await;
    assert_eq!(attempts, 2);
    assert_eq!(runs, ["lost", "succeeded"]);
    assert!(last_error.unwrap().contains("lease of ghost expired"));
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
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(q.store.recover_expired_leases().await.unwrap(), 1);
    assert_eq!(q.state(ids[0]).await.0, JobState::Dead);
}

#[tokio::test]
async fn shutdown_lets_running_jobs_finish_within_the_grace_period() {
    let q = queue(5).await;
    let ids = q.enqueue(&[1]).await;
    let handler = Scripted::new(|_| Step::Sleep(Duration::from_millis(200)));
    let pool = q.pool(handler.clone(), 1, 2000, 5000);
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
    assert_eq!(detail.job.result, Some(serde_json::json!({"ok": true})));
}

fn stop(target: u64) -> Job {
    Job {
        task: Task::Command {
            command: JobCommand::Stop,
            comment_id: 9,
        },
        ..job(target)
    }
}

async fn claim(q: &Queue) -> Option<ClaimedJob> {
    q.store
        .claim_job("w", Duration::from_secs(30))
        .await
        .unwrap()
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
        .supersede_waiting("github:acme/widgets#7", newest)
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
        .target_history("github:acme/widgets#7", 10)
        .await
        .unwrap();
    let ids: Vec<i64> = history.iter().map(|j| j.id).collect();
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
        .request_stop("github:acme/widgets#7", stop_id, "stopped by @maintainer")
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

#[tokio::test]
async fn a_running_job_asked_to_stop_is_cancelled_within_a_poll() {
    let q = queue(5).await;
    let ids = q.enqueue(&[7, 8]).await;
    let handler = Scripted::new(|_| Step::Sleep(Duration::from_secs(60)));
    let pool = q.pool(handler.clone(), 2, 5000, 5000);
    q.wait_for(ids[0], JobState::Running).await;
    q.wait_for(ids[1], JobState::Running).await;
    let asked = std::time::Instant::now();
    let stopped = q
        .store
        .request_stop("github:acme/widgets#7", 999, "stopped by @maintainer")
        .await
        .unwrap();
    assert_eq!(stopped, [ids[0]]);
    q.wait_for(ids[0], JobState::Cancelled).await;
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "stopping took {:?}",
        asked.elapsed()
    );
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
    let mut ids: Vec<i64> = claimed.iter().map(|(id, _)| *id).collect();
    ids.sort();
    expected.sort();
    assert_eq!(ids, expected, "each target's first job, each exactly once");
}
