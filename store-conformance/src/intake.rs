//! Recording deliveries: the group commit must give every delivery in a
//! batch the answer it would get alone, and no answer before its commit.

use std::sync::Arc;

use forgehand_store::{
    CompressedPayload, DeliveryQuery, DuplicateOf, InstallationChange, InstallationUpdate,
    IntakeWriter, JobState, Outcome, PayloadDigest, Recorded,
};
use forgehand_types::ForgeKind;

use crate::fixtures::*;
use crate::Backend;

fn all() -> DeliveryQuery {
    DeliveryQuery {
        limit: 1000,
        ..Default::default()
    }
}

pub async fn one_batch_answers_each_delivery_as_if_it_came_alone(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let first = store
        .record_deliveries(&[delivery("a", Outcome::Accepted, 1)])
        .await
        .unwrap();
    let Recorded::New { jobs: a_jobs, .. } = &first[0] else {
        panic!("{first:?}")
    };

    let batch = [
        delivery("b", Outcome::Accepted, 2),
        delivery("a", Outcome::Accepted, 1), // recorded in an earlier batch
        delivery("c", Outcome::Rejected, 0), // refused: does not hold "c"
        delivery("c", Outcome::Ignored, 0),
        delivery("b", Outcome::Accepted, 2), // the same id twice in one batch
        delivery("d", Outcome::Accepted, 1),
    ];
    let got = store.record_deliveries(&batch).await.unwrap();
    let Recorded::New { jobs: b_jobs, .. } = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(b_jobs.len(), 2);
    assert!(
        matches!(&got[1], Recorded::Duplicate { jobs, of: DuplicateOf::DeliveryId, .. } if jobs == a_jobs),
        "{:?}",
        got[1]
    );
    assert!(matches!(&got[2], Recorded::New { jobs, .. } if jobs.is_empty()));
    assert!(matches!(&got[3], Recorded::New { jobs, .. } if jobs.is_empty()));
    assert!(
        matches!(&got[4], Recorded::Duplicate { jobs, .. } if jobs == b_jobs),
        "{:?}",
        got[4]
    );
    let Recorded::New { jobs: d_jobs, .. } = &got[5] else {
        panic!("{got:?}")
    };
    assert_eq!(d_jobs.len(), 1);
    assert!(d_jobs[0] > b_jobs[1], "jobs are numbered in arrival order");

    let rows = store.list_deliveries(&all()).await.unwrap();
    let listed: Vec<(String, Outcome, Vec<JobId>)> = rows
        .iter()
        .rev()
        .map(|r| (r.delivery_id.clone().unwrap(), r.outcome, r.jobs.clone()))
        .collect();
    assert_eq!(
        listed,
        [
            ("a".into(), Outcome::Accepted, a_jobs.clone()),
            ("b".into(), Outcome::Accepted, b_jobs.clone()),
            ("a".into(), Outcome::Duplicate, a_jobs.clone()),
            ("c".into(), Outcome::Rejected, vec![]),
            ("c".into(), Outcome::Ignored, vec![]),
            ("b".into(), Outcome::Duplicate, b_jobs.clone()),
            ("d".into(), Outcome::Accepted, d_jobs.clone()),
        ]
    );
    let duplicate = &rows[1];
    assert_eq!(duplicate.status_code, 200);
    assert_eq!(
        duplicate.reason.as_deref(),
        Some(DuplicateOf::DeliveryId.reason())
    );
    assert_eq!(
        duplicate.duplicate_of,
        Some(rows[5].id),
        "points at b's first row"
    );
    assert_eq!(count(&*store, JobState::Queued).await, 4);
}

pub async fn a_batch_larger_than_one_statement_is_recorded_whole(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let batch: Vec<_> = (0..600)
        .map(|n| delivery(&format!("n{n}"), Outcome::Accepted, 1))
        .collect();
    let got = store.record_deliveries(&batch).await.unwrap();
    let mut previous = JobId(0);
    for r in got {
        let Recorded::New { jobs, .. } = r else {
            panic!("{r:?}")
        };
        assert!(jobs[0] > previous);
        previous = jobs[0];
    }
    assert_eq!(count(&*store, JobState::Queued).await, 600);
}

pub async fn an_accepted_body_is_kept_compressed_and_comes_back_whole(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/testdata/github/webhook-examples/issues/labeled.1.json"
    ))
    .expect("the shared test data beside the checkout");
    let mut accepted = delivery("kept", Outcome::Accepted, 1);
    accepted.payload = Some(CompressedPayload::compress(&body));
    let compressed = accepted.payload.as_ref().unwrap().as_bytes().len();
    assert!(
        compressed * 3 < body.len(),
        "{compressed} of {} bytes",
        body.len()
    );
    let mut ignored = delivery("dropped", Outcome::Ignored, 0);
    ignored.payload = Some(CompressedPayload::compress(&body));
    let got = store.record_deliveries(&[accepted, ignored]).await.unwrap();
    let (Recorded::New { delivery: a, .. }, Recorded::New { delivery: i, .. }) = (&got[0], &got[1])
    else {
        panic!("{got:?}")
    };
    assert_eq!(
        store.delivery_payload(*a).await.unwrap().as_deref(),
        Some(body.as_slice())
    );
    assert_eq!(
        store.delivery_payload(*i).await.unwrap(),
        None,
        "ignored bodies are not kept"
    );
}

/// The intake writer keeps a transaction open while the previous commit
/// is made durable: what it adds is visible to nobody until committed,
/// and a rollback (after a failed delivery) takes back everything added
/// since the last commit.
pub async fn the_open_intake_transaction_is_all_or_nothing(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let ids = |rows: Vec<forgehand_store::DeliveryRow>| {
        let mut ids: Vec<_> = rows.into_iter().filter_map(|r| r.delivery_id).collect();
        ids.sort();
        ids
    };
    let log_store = store.clone();
    let mut log = tokio::task::spawn_blocking(move || log_store.intake_log().unwrap())
        .await
        .unwrap();
    // The log is driven as the intake writer drives it: from a thread
    // where blocking is allowed.
    let mut log = tokio::task::spawn_blocking(move || {
        log.add(&[delivery("a", Outcome::Accepted, 1)]).unwrap();
        log.add(&[delivery("b", Outcome::Accepted, 1)]).unwrap();
        log
    })
    .await
    .unwrap();
    assert!(
        ids(store.list_deliveries(&all()).await.unwrap()).is_empty(),
        "uncommitted deliveries are visible"
    );
    assert_eq!(count(&*store, JobState::Queued).await, 0);
    let mut log = tokio::task::spawn_blocking(move || {
        log.rollback();
        log.commit().unwrap();
        log
    })
    .await
    .unwrap();
    assert!(ids(store.list_deliveries(&all()).await.unwrap()).is_empty());

    tokio::task::spawn_blocking(move || {
        log.add(&[delivery("c", Outcome::Accepted, 1)]).unwrap();
        log.add(&[delivery("d", Outcome::Accepted, 0)]).unwrap();
        log.commit().unwrap();
        log.sync_handle().sync().unwrap();
    })
    .await
    .unwrap();
    assert_eq!(
        ids(store.list_deliveries(&all()).await.unwrap()),
        ["c", "d"]
    );
    assert_eq!(count(&*store, JobState::Queued).await, 1);
}

/// The group-commit writer on the store's own intake log: requests that
/// come together share commits, each gets its own answer (new, or the
/// first one's jobs for a duplicate), only once it is committed, and the
/// local workers are woken for the new jobs.
pub async fn the_intake_writer_answers_each_request_once_it_is_committed(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let log_store = store.clone();
    let log = tokio::task::spawn_blocking(move || log_store.intake_log().unwrap())
        .await
        .unwrap();
    let jobs_ready = Arc::new(tokio::sync::Notify::new());
    let woken = jobs_ready.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    let writer = IntakeWriter::spawn(log, 8, jobs_ready.clone());
    let requests: Vec<_> = (0..40)
        .map(|n| {
            let writer = writer.clone();
            // Every fifth is a redelivery of the one before it.
            let id = format!("w-{}", n - usize::from(n % 5 == 4));
            tokio::spawn(async move {
                let answer = writer
                    .record(delivery(&id, Outcome::Accepted, 1))
                    .await
                    .unwrap();
                (id, answer)
            })
        })
        .collect();
    let mut new = std::collections::HashMap::new();
    let mut duplicates = Vec::new();
    for request in requests {
        let (id, answer) = request.await.unwrap();
        // Answered only once committed: what it says is there for anyone.
        let jobs = match &answer {
            Recorded::New { jobs, .. } => jobs.clone(),
            Recorded::Duplicate { jobs, .. } => jobs.clone(),
        };
        for job in &jobs {
            assert!(store.job(*job).await.unwrap().is_some(), "{answer:?}");
        }
        match answer {
            Recorded::New { jobs, .. } => assert!(new.insert(id, jobs).is_none()),
            Recorded::Duplicate { jobs, .. } => duplicates.push((id, jobs)),
        }
    }
    assert_eq!((new.len(), duplicates.len()), (32, 8));
    for (id, jobs) in duplicates {
        assert_eq!(
            new[&id], jobs,
            "a redelivery of {id} answers with its first's jobs"
        );
    }
    woken.await;
    assert_eq!(count(&*store, JobState::Queued).await, 32);
}

pub async fn a_body_replayed_under_a_new_delivery_id_is_a_duplicate(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let body = b"{\"action\":\"labeled\"}";
    let signed = |id: &str, forge: ForgeKind| {
        let mut d = delivery(id, Outcome::Accepted, 1);
        d.forge = forge;
        d.digest = Some(PayloadDigest::of(forge, body));
        d
    };
    let first = store
        .record_deliveries(&[signed("r-1", ForgeKind::Github)])
        .await
        .unwrap();
    let Recorded::New {
        delivery: first_row,
        jobs,
    } = &first[0]
    else {
        panic!("{first:?}")
    };
    let replay = store
        .record_deliveries(&[signed("r-2", ForgeKind::Github)])
        .await
        .unwrap();
    assert!(
        matches!(&replay[0], Recorded::Duplicate { jobs: j, of: DuplicateOf::Payload, .. } if j == jobs),
        "{replay:?}"
    );
    let rows = store.list_deliveries(&all()).await.unwrap();
    assert_eq!(rows[0].outcome, Outcome::Duplicate);
    assert_eq!(rows[0].duplicate_of, Some(*first_row));
    assert_eq!(
        rows[0].reason.as_deref(),
        Some(DuplicateOf::Payload.reason())
    );
    assert_eq!(store.delivery_payload(rows[0].id).await.unwrap(), None);
    assert_eq!(count(&*store, JobState::Queued).await, 1, "no second job");

    // The replay holds no delivery id: r-2 with a body of its own is taken.
    let genuine = store
        .record_deliveries(&[delivery("r-2", Outcome::Accepted, 1)])
        .await
        .unwrap();
    assert!(matches!(&genuine[0], Recorded::New { .. }), "{genuine:?}");

    // Gitea and Forgejo share their secrets: one signer, one body.
    let gitea = store
        .record_deliveries(&[signed("g-1", ForgeKind::Gitea)])
        .await
        .unwrap();
    assert!(matches!(&gitea[0], Recorded::New { .. }), "{gitea:?}");
    let forgejo = store
        .record_deliveries(&[signed("f-1", ForgeKind::Forgejo)])
        .await
        .unwrap();
    assert!(
        matches!(
            &forgejo[0],
            Recorded::Duplicate {
                of: DuplicateOf::Payload,
                ..
            }
        ),
        "{forgejo:?}"
    );
}

pub async fn a_refused_delivery_does_not_hold_its_delivery_id(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let got = store
        .record_deliveries(&[
            delivery("x", Outcome::Rejected, 0),
            delivery("x", Outcome::Rejected, 0),
            delivery("x", Outcome::Accepted, 1),
        ])
        .await
        .unwrap();
    assert!(
        got.iter().all(|r| matches!(r, Recorded::New { .. })),
        "{got:?}"
    );
    let rejected = DeliveryQuery {
        outcome: Some(Outcome::Rejected),
        ..all()
    };
    let rows = store.list_deliveries(&rejected).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r.status_code == 401 && r.jobs.is_empty()));
    assert_eq!(
        store.delivery_payload(rows[0].id).await.unwrap(),
        None,
        "a refused body is not kept"
    );
}

pub async fn installations_are_recorded_with_their_deliveries(backend: &dyn Backend) {
    let opened = backend.open(5).await;
    let store = opened.store.clone();
    let change = |id: &str, at: i64, update: InstallationUpdate| {
        let mut d = delivery_at(id, Outcome::Ignored, at, &[]);
        d.installation = Some(InstallationChange {
            id: 42,
            account: "acme".into(),
            update,
        });
        d.digest = Some(PayloadDigest::of(ForgeKind::Github, id.as_bytes()));
        d
    };
    let repos = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    store
        .record_deliveries(&[
            change(
                "i-1",
                10,
                InstallationUpdate::Installed {
                    repositories: repos(&["acme/a", "acme/b"]),
                },
            ),
            change(
                "i-2",
                20,
                InstallationUpdate::Repositories {
                    added: repos(&["acme/c"]),
                    removed: repos(&["acme/a"]),
                },
            ),
            change("i-3", 30, InstallationUpdate::Suspended),
        ])
        .await
        .unwrap();
    let installed = store.installations().await.unwrap();
    assert_eq!(installed.len(), 1);
    assert_eq!(
        (
            installed[0].id,
            installed[0].account.as_str(),
            installed[0].state.as_str()
        ),
        (42, "acme", "suspended")
    );
    assert_eq!(installed[0].repositories, ["acme/b", "acme/c"]);
    assert_eq!(installed[0].updated_at, 30);

    // A redelivery changes nothing; a new installation starts over.
    store
        .record_deliveries(&[change("i-3", 40, InstallationUpdate::Unsuspended)])
        .await
        .unwrap();
    let installed = store.installations().await.unwrap();
    assert_eq!(
        (installed[0].state.as_str(), installed[0].updated_at),
        ("suspended", 30)
    );
    store
        .record_deliveries(&[change(
            "i-4",
            50,
            InstallationUpdate::Installed {
                repositories: repos(&["acme/z"]),
            },
        )])
        .await
        .unwrap();
    let installed = store.installations().await.unwrap();
    assert_eq!(installed[0].state, "active");
    assert_eq!(installed[0].repositories, ["acme/z"]);
    assert_eq!(installed[0].updated_at, 50);
    store
        .record_deliveries(&[change("i-5", 60, InstallationUpdate::Deleted)])
        .await
        .unwrap();
    assert_eq!(store.installations().await.unwrap()[0].state, "deleted");
}
