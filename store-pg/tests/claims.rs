//! Claiming on PostgreSQL across replicas: stores with pools of their own
//! (as on several hosts) never take one job twice nor two of one target,
//! a job another claimer holds is skipped rather than waited for, and the
//! counts /metrics reads stay what counting the table says.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use forgehand_store::job::{Command, Job, Task};
use forgehand_store::JobId;
use forgehand_store::{Finish, JobState, NewDelivery, Outcome, Recorded, Store};
use forgehand_store_pg::{PgOptions, PgStore};
use forgehand_store_test_support::PgServer;
use forgehand_types::{ForgeKind, Repo};

fn job(target: u64, help: bool) -> Job {
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
        requested_by: "m".into(),
        task: if help {
            Task::Command {
                command: Command::Help,
                comment_id: 1,
            }
        } else {
            Task::Assigned
        },
    }
}

fn delivery(id: String, jobs: &[Job]) -> NewDelivery {
    NewDelivery {
        forge: ForgeKind::Github,
        delivery_id: Some(id),
        event: Some("issues".into()),
        event_name: None,
        outcome: Outcome::Accepted,
        status_code: 202,
        reason: None,
        repo: None,
        target: None,
        sender: None,
        detail: None,
        payload: None,
        jobs: jobs.iter().map(Into::into).collect(),
        installation: None,
        digest: None,
        received_at: forgehand_store::time::now_ms(),
    }
}

/// Two replicas: one database, a pool each.
async fn replicas() -> (PgStore, PgStore) {
    let url = PgServer::shared().create_database().await.unwrap();
    let options = PgOptions {
        pool_size: 4,
        ..PgOptions::default()
    };
    let a = PgStore::connect(&url, &options).await.unwrap();
    let b = PgStore::connect(&url, &options).await.unwrap();
    (a, b)
}

async fn enqueue(store: &PgStore, jobs: &[Job]) -> Vec<JobId> {
    let batch: Vec<_> = jobs
        .iter()
        .enumerate()
        .map(|(n, j)| delivery(format!("{}-{n}", j.target), std::slice::from_ref(j)))
        .collect();
    store
        .record_deliveries(&batch)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|r| match r {
            Recorded::New { jobs, .. } => jobs,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claimers_on_two_replicas_never_take_one_job_twice() {
    let (a, b) = replicas().await;
    // 60 targets with two help jobs each: the second waits for the first.
    let jobs: Vec<Job> = (1..=60)
        .flat_map(|t| [job(t, true), job(t, true)])
        .collect();
    let ids = enqueue(&a, &jobs).await;
    let stores: Vec<Arc<dyn Store>> = vec![Arc::new(a.clone()), Arc::new(b.clone())];
    let claimers: Vec<_> = (0..8)
        .map(|n| {
            let store = stores[n % 2].clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                let worker = format!("replica{}-w{n}", n % 2);
                let mut empty = 0;
                while empty < 2 {
                    match store
                        .claim_job(&worker, Duration::from_secs(600))
                        .await
                        .unwrap()
                    {
                        Some(claimed) => {
                            empty = 0;
                            got.push((claimed.id, claimed.job.target));
                            // Ending it lets the target's second job run.
                            let done = Finish::Succeeded {
                                result: serde_json::json!({}),
                            };
                            assert!(store.finish_job(&claimed, &worker, done).await.unwrap());
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
    let unique: HashSet<JobId> = claimed.iter().map(|(id, _)| *id).collect();
    assert_eq!(unique.len(), claimed.len(), "a job was claimed twice");
    let mut got: Vec<JobId> = unique.into_iter().collect();
    got.sort();
    assert_eq!(got, ids, "every job, exactly once");
    let runs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_runs")
        .fetch_one(a.pool())
        .await
        .unwrap();
    assert_eq!(runs, 120, "one run per job");
    // Each target's jobs were claimed in the order they came (runs are
    // numbered as they start; the clocks of two hosts would not tell).
    let out_of_order: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM job_runs r1 JOIN jobs j1 ON j1.id = r1.job \
         JOIN jobs j2 ON j2.target_key = j1.target_key AND j2.id > j1.id \
         JOIN job_runs r2 ON r2.job = j2.id WHERE r2.id < r1.id",
    )
    .fetch_one(a.pool())
    .await
    .unwrap();
    assert_eq!(out_of_order, 0);
}

/// SKIP LOCKED: a job another claimer holds (here: a transaction that
/// locked its row and waits) is passed over at once, not waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_another_claimer_holds_is_skipped_not_waited_for() {
    let (a, b) = replicas().await;
    let ids = enqueue(&a, &[job(1, false), job(2, false)]).await;
    let mut holder = a.pool().begin().await.unwrap();
    sqlx::query("SELECT id FROM jobs WHERE id = $1 FOR UPDATE")
        .bind(ids[0].get())
        .execute(&mut *holder)
        .await
        .unwrap();
    // Were the claim to wait for the lock, it would wait until the holder
    // ends, which it does only after the claim: the test would hang, so a
    // generous bound turns that into a failure.
    let claimed = tokio::time::timeout(
        Duration::from_secs(30),
        b.claim_job("b", Duration::from_secs(60)),
    )
    .await
    .expect("the claim waited for the held job")
    .unwrap()
    .unwrap();
    assert_eq!(claimed.id, ids[1], "the next job, past the held one");
    assert!(
        b.claim_job("b", Duration::from_secs(60))
            .await
            .unwrap()
            .is_none(),
        "the held job is not claimable while held"
    );
    holder.rollback().await.unwrap();
    let next = b
        .claim_job("b", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.id, ids[0], "once let go, it is taken");
}

/// The counts kept by triggers are what counting the table says, after
/// claims, ends, supersedes, recoveries and pruning from several
/// replicas at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_counts_equal_counting_the_table_under_concurrent_changes() {
    let (a, b) = replicas().await;
    let jobs: Vec<Job> = (1..=40)
        .flat_map(|t| [job(t, false), job(t, false), job(t, true)])
        .collect();
    enqueue(&a, &jobs).await;
    let stores = [a.clone(), b.clone()];
    let workers: Vec<_> = (0..6)
        .map(|n| {
            let store = stores[n % 2].clone();
            tokio::spawn(async move {
                let worker = format!("w{n}");
                let lease = Duration::from_secs(60);
                let mut handled = 0;
                while let Some(claimed) = store.claim_job(&worker, lease).await.unwrap() {
                    let target = claimed.job.target_key();
                    let finish = match handled % 4 {
                        0 => Finish::Succeeded {
                            result: serde_json::json!({}),
                        },
                        1 => Finish::Failed { error: "e".into() },
                        2 => {
                            use forgehand_store::JobLedger;
                            store.supersede_waiting(&target, claimed.id).await.unwrap();
                            Finish::Cancelled {
                                reason: "stopped".into(),
                            }
                        }
                        _ => Finish::Dead { error: "e".into() },
                    };
                    assert!(store.finish_job(&claimed, &worker, finish).await.unwrap());
                    handled += 1;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let kept = a.job_counts().await.unwrap();
    let counted: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, COUNT(*) FROM jobs GROUP BY state")
            .fetch_all(a.pool())
            .await
            .unwrap();
    for (state, n) in &kept {
        let actual = counted
            .iter()
            .find(|(s, _)| s == state.as_str())
            .map_or(0, |(_, n)| *n);
        assert_eq!(*n, actual, "{state:?}: {kept:?} against {counted:?}");
    }
    assert_eq!(kept.iter().map(|(_, n)| n).sum::<i64>(), 120);
    assert_eq!(kept[0], (JobState::Queued, 0));
    let later = forgehand_store::time::now_ms() + 60_000;
    b.prune(&forgehand_store::Retention {
        deliveries_before: later,
        refused_before: later,
        jobs_before: later,
        digests_before: later,
    })
    .await
    .unwrap();
    assert!(a.job_counts().await.unwrap().iter().all(|(_, n)| *n == 0));
    // And reading them does not count the jobs: a few rows per state.
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_counts")
        .fetch_one(a.pool())
        .await
        .unwrap();
    assert!(rows <= 6 * 16, "{rows} rows");
}
