//! Retention: old deliveries and finished jobs go, waiting and running
//! jobs (and the deliveries they came from) stay, refused deliveries go
//! sooner, digests later.

use forgehand_store::{
    DeliveryQuery, Finish, JobQuery, JobState, NewDelivery, Outcome, PayloadDigest, Recorded,
    Retention,
};
use forgehand_types::ForgeKind;

use crate::fixtures::*;
use crate::Backend;

/// A delivery received at `at`, with `jobs` jobs on `target`, and its
/// body's digest unless refused.
fn aged(id: &str, outcome: Outcome, at: i64, target: u64, jobs: usize) -> NewDelivery {
    let mut d = delivery_at(id, outcome, at, &vec![labeled(target); jobs]);
    d.digest =
        (outcome != Outcome::Rejected).then(|| PayloadDigest::of(ForgeKind::Github, id.as_bytes()));
    d
}

/// 30 days for deliveries, 7 for refused ones, 90 for digests; finished
/// jobs by `jobs_before`.
fn retention(now: i64, jobs_before: i64) -> Retention {
    Retention {
        deliveries_before: now - 30 * DAY,
        refused_before: now - 7 * DAY,
        jobs_before,
        digests_before: now - 90 * DAY,
    }
}

pub async fn old_deliveries_and_finished_jobs_go_and_waiting_or_running_work_stays(
    backend: &dyn Backend,
) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let now = now();
    let old = now - 40 * DAY;
    store
        .record_deliveries(&[
            aged("old-finished", Outcome::Accepted, old, 1, 1),
            aged("old-running", Outcome::Accepted, old, 2, 1),
            aged("old-waiting", Outcome::Accepted, old, 3, 1),
            aged("old-ignored", Outcome::Ignored, old, 4, 0),
            aged("old-refused", Outcome::Rejected, old, 5, 0),
            aged("recent-refused", Outcome::Rejected, now - 10 * DAY, 6, 0),
            aged("recent", Outcome::Accepted, now - DAY, 7, 0),
        ])
        .await
        .unwrap();
    // A redelivery of an old one: a duplicate, as old as the rest.
    let mut again = aged("old-ignored", Outcome::Ignored, old, 4, 0);
    again.digest = None;
    store.record_deliveries(&[again]).await.unwrap();

    // Target 1's job finishes, target 2's runs; target 3's waits.
    for _ in 0..2 {
        let claimed = claim(&*store).await.unwrap();
        if claimed.job.target == 1 {
            let done = Finish::Succeeded {
                result: serde_json::json!({}),
            };
            assert!(store.finish_job(&claimed, "w", done).await.unwrap());
        }
    }
    // Finished jobs are kept until a day from now: none goes yet.
    let kept = store.prune(&retention(now, now - DAY)).await.unwrap();
    assert_eq!(
        (kept.jobs, kept.deliveries),
        (0, 2),
        "old-ignored and its duplicate"
    );
    assert_eq!(kept.refused, 2);

    // Then the finished job is past its time, and its delivery with it.
    let pruned = store.prune(&retention(now, now + DAY)).await.unwrap();
    assert_eq!((pruned.jobs, pruned.deliveries), (1, 1), "old-finished");
    assert_eq!((pruned.refused, pruned.digests), (0, 0));

    let all = DeliveryQuery {
        limit: 100,
        ..Default::default()
    };
    let mut kept: Vec<String> = store
        .list_deliveries(&all)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|d| d.delivery_id)
        .collect();
    kept.sort();
    assert_eq!(kept, ["old-running", "old-waiting", "recent"]);
    let jobs = store
        .list_jobs(&JobQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let states: Vec<JobState> = jobs.iter().rev().map(|j| j.state).collect();
    assert_eq!(states, [JobState::Running, JobState::Queued]);

    // The digests outlive the deliveries, and go in their own time: all
    // but the most recent one's, 60 days from now.
    let later = store.prune(&retention(now + 60 * DAY, now)).await.unwrap();
    assert_eq!(later.digests, 4);
    let again = store.prune(&retention(now + 60 * DAY, now)).await.unwrap();
    assert_eq!(
        again.deliveries + again.jobs + again.refused + again.digests,
        0,
        "nothing left to do is nothing done"
    );
    // old-waiting's delivery is kept with its waiting job: a redelivery
    // of it is still a duplicate.
    let replay = store
        .record_deliveries(&[aged("old-waiting", Outcome::Accepted, now, 3, 1)])
        .await
        .unwrap();
    assert!(
        matches!(&replay[0], Recorded::Duplicate { .. }),
        "{replay:?}"
    );
}

pub async fn pruning_goes_batch_by_batch_through_a_backlog(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let old = now() - 400 * DAY;
    let batch: Vec<NewDelivery> = (0..1300)
        .map(|n| aged(&format!("b-{n}"), Outcome::Ignored, old, 1, 0))
        .collect();
    store.record_deliveries(&batch).await.unwrap();
    let later = old + DAY;
    let pruned = store
        .prune(&Retention {
            deliveries_before: later,
            refused_before: later,
            jobs_before: later,
            digests_before: later,
        })
        .await
        .unwrap();
    assert_eq!((pruned.deliveries, pruned.digests), (1300, 1300));
}

pub async fn a_replay_after_the_first_delivery_was_pruned_is_still_a_duplicate(
    backend: &dyn Backend,
) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let body = |id: &str| {
        let mut d = delivery(id, Outcome::Accepted, 1);
        d.digest = Some(PayloadDigest::of(ForgeKind::Github, b"the same body"));
        d
    };
    store.record_deliveries(&[body("p-1")]).await.unwrap();
    let claimed = claim(&*store).await.unwrap();
    succeed(&*store, &claimed).await;
    let later = now() + 1000;
    let pruned = store
        .prune(&Retention {
            deliveries_before: later,
            refused_before: later,
            jobs_before: later,
            digests_before: 0,
        })
        .await
        .unwrap();
    assert_eq!((pruned.deliveries, pruned.jobs, pruned.digests), (1, 1, 0));

    // Under a new delivery id, and under the first one (its row is gone,
    // so the id alone would not tell).
    for id in ["p-2", "p-1"] {
        let got = store.record_deliveries(&[body(id)]).await.unwrap();
        assert!(
            matches!(&got[0], Recorded::Duplicate { jobs, .. } if jobs.is_empty()),
            "{id}: {got:?}"
        );
    }
    assert_eq!(count(&*store, JobState::Queued).await, 0, "no new job");
}
