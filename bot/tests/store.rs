//! Recording deliveries in batches: the group commit must give every
//! delivery in a batch the answer it would get alone.

use forgehand_bot::job::{Job, Task};
use forgehand_bot::store::{
    CompressedPayload, DeliveryQuery, NewDelivery, Outcome, Recorded, SqliteStore, Store,
};
use forgehand_forge::{ForgeKind, Repo};

fn delivery(id: &str, outcome: Outcome, jobs: usize) -> NewDelivery {
    let job = Job {
        forge: ForgeKind::Github,
        repo: Repo {
            owner: "acme".into(),
            name: "widgets".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        },
        target: 1,
        on_pull_request: false,
        requested_by: "m".into(),
        task: Task::Assigned,
    };
    NewDelivery {
        forge: "github".into(),
        delivery_id: Some(id.into()),
        event: Some("issues".into()),
        event_name: Some("issues.assigned".into()),
        outcome,
        status_code: if outcome == Outcome::Rejected {
            401
        } else {
            202
        },
        reason: None,
        repo: None,
        target: None,
        sender: None,
        detail: None,
        payload: Some(CompressedPayload::compress(b"{\"x\":1}")),
        jobs: vec![job; jobs],
        received_at: 1,
    }
}

async fn store() -> (SqliteStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("s.db").display());
    (SqliteStore::connect(&url).await.unwrap(), dir)
}

#[tokio::test]
async fn one_batch_answers_each_delivery_as_if_it_came_alone() {
    let (store, _dir) = store().await;
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
        matches!(&got[1], Recorded::Duplicate { jobs, .. } if jobs == a_jobs),
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

    let rows = store
        .list_deliveries(&DeliveryQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let listed: Vec<(String, Outcome, Vec<i64>)> = rows
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
}

#[tokio::test]
async fn a_batch_larger_than_one_statement_is_recorded_whole() {
    let (store, _dir) = store().await;
    let batch: Vec<_> = (0..600)
        .map(|n| delivery(&format!("n{n}"), Outcome::Accepted, 1))
        .collect();
    let got = store.record_deliveries(&batch).await.unwrap();
    let mut previous = 0;
    for r in got {
        let Recorded::New { jobs, .. } = r else {
            panic!("{r:?}")
        };
        assert!(jobs[0] > previous);
        previous = jobs[0];
    }
    let counts = store.job_counts().await.unwrap();
    assert!(
        counts.contains(&(forgehand_bot::store::JobState::Queued, 600)),
        "{counts:?}"
    );
}

#[tokio::test]
async fn an_accepted_body_is_kept_compressed_and_comes_back_whole() {
    let (store, _dir) = store().await;
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
