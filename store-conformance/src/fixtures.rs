//! What the cases share: jobs, deliveries and the queue's views of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use forgehand_store::job::{Command, Job, Task};
use forgehand_store::{
    ClaimedJob, CompressedPayload, Finish, JobState, NewDelivery, Outcome, Recorded, Store,
};
use forgehand_types::{ForgeKind, Repo};
pub use forgehand_types::{JobId, TargetKey};

pub const DAY: i64 = 24 * 60 * 60 * 1000;
/// Where `labeled(7)` works.
pub fn target_7() -> TargetKey {
    labeled(7).target_key()
}

/// Work on an issue: a newer one supersedes it while it waits.
pub fn labeled(target: u64) -> Job {
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

fn command(target: u64, command: Command) -> Job {
    Job {
        task: Task::Command {
            command,
            comment_id: 9,
        },
        ..labeled(target)
    }
}

/// A job that supersedes nothing, so several can wait for one target.
pub fn help(target: u64) -> Job {
    command(target, Command::Help)
}

pub fn stop(target: u64) -> Job {
    command(target, Command::Stop)
}

/// A unique delivery id.
pub fn fresh_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("d-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A delivery received at `at` making `jobs`.
pub fn delivery_at(id: &str, outcome: Outcome, at: i64, jobs: &[Job]) -> NewDelivery {
    NewDelivery {
        forge: ForgeKind::Github,
        delivery_id: Some(id.into()),
        event: Some("issues".into()),
        event_name: Some("issues.labeled".into()),
        outcome,
        status_code: if outcome == Outcome::Rejected {
            401
        } else {
            202
        },
        reason: None,
        repo: Some("acme/widgets".into()),
        target: jobs.first().map(|j| j.target),
        sender: Some("maintainer".into()),
        detail: None,
        payload: Some(CompressedPayload::compress(b"{\"x\":1}")),
        jobs: jobs.iter().map(Into::into).collect(),
        installation: None,
        digest: None,
        received_at: at,
    }
}

/// A delivery received now with `n` jobs on issue 1.
pub fn delivery(id: &str, outcome: Outcome, n: usize) -> NewDelivery {
    delivery_at(id, outcome, now(), &vec![labeled(1); n])
}

pub fn now() -> i64 {
    forgehand_store::time::now_ms()
}

/// Queues each job in a delivery of its own; returns their ids.
pub async fn enqueue(store: &dyn Store, jobs: &[Job]) -> Vec<JobId> {
    let mut ids = Vec::new();
    for job in jobs {
        let recorded = store
            .record_deliveries(&[delivery_at(
                &fresh_id(),
                Outcome::Accepted,
                now(),
                std::slice::from_ref(job),
            )])
            .await
            .unwrap();
        match &recorded[0] {
            Recorded::New { jobs, .. } => ids.extend(jobs),
            other => panic!("{other:?}"),
        }
    }
    ids
}

pub async fn enqueue_labeled(store: &dyn Store, targets: &[u64]) -> Vec<JobId> {
    let jobs: Vec<Job> = targets.iter().map(|&t| labeled(t)).collect();
    enqueue(store, &jobs).await
}

pub const LEASE: Duration = Duration::from_secs(600);

pub async fn claim(store: &dyn Store) -> Option<ClaimedJob> {
    store.claim_job("w", LEASE).await.unwrap()
}

pub async fn succeed(store: &dyn Store, job: &ClaimedJob) {
    let done = Finish::Succeeded {
        result: serde_json::json!({}),
    };
    assert!(store.finish_job(job, "w", done).await.unwrap());
}

/// A job's state, attempts, last error and how each run ended.
pub async fn state(store: &dyn Store, id: JobId) -> (JobState, i64, Option<String>, Vec<String>) {
    let detail = store.job(id).await.unwrap().expect("the job exists");
    let runs = detail
        .runs
        .iter()
        .map(|r| {
            r.outcome.map_or("running".to_owned(), |o| {
                serde_json::to_value(o)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
        })
        .collect();
    (
        detail.job.state,
        detail.job.attempts,
        detail.job.last_error,
        runs,
    )
}

/// The jobs in `state`, as the store counts them.
pub async fn count(store: &dyn Store, state: JobState) -> i64 {
    store
        .job_counts()
        .await
        .unwrap()
        .into_iter()
        .find(|(s, _)| *s == state)
        .map_or(0, |(_, n)| n)
}

/// Makes a held lease expire at once, as if its worker had stopped
/// heartbeating long ago, without waiting for it.
pub async fn expire(store: &dyn Store, job: &ClaimedJob, worker: &str) {
    assert!(store.heartbeat(job, worker, Duration::ZERO).await.unwrap());
    // Expired is "before now": let the clock pass the lease's end.
    tokio::time::sleep(Duration::from_millis(5)).await;
}
