//! A captured signed body sent again under a new delivery id: recognised
//! by its digest while the digest is kept (also once its delivery is
//! pruned), and by its own timestamps once it is older than that.

mod common;

use std::time::Duration;

use axum::http::StatusCode;
use common::*;
use forgehand_bot::store::{Finish, Retention};
use serde_json::{json, Value};

fn issue_at(number: u64, at: &str) -> Vec<u8> {
    let mut value: Value = serde_json::from_slice(&labeled_issue("forgehand", number)).unwrap();
    stamp(&mut value, at);
    serde_json::to_vec(&value).unwrap()
}

#[tokio::test]
async fn a_signed_body_replayed_under_a_new_delivery_id_makes_no_second_job() {
    let app = TestApp::new().await;
    let body = labeled_issue("forgehand", 7);
    let (status, first) = app.send(github("issues", "d-1", body.clone())).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");

    let (status, replay) = app.send(github("issues", "d-2", body.clone())).await;
    assert_eq!(status, StatusCode::OK, "{replay}");
    assert_eq!(replay["outcome"], "duplicate");
    assert_eq!(replay["jobs"], first["jobs"]);
    // Under another event header it is the same body all the same.
    let (status, replay) = app.send(github("issue_comment", "d-3", body)).await;
    assert_eq!(status, StatusCode::OK, "{replay}");
    assert_eq!(replay["outcome"], "duplicate");

    assert_eq!(app.jobs().await.len(), 1);
    let deliveries = app.deliveries().await;
    let outcomes: Vec<_> = deliveries.iter().map(|d| d["outcome"].clone()).collect();
    assert_eq!(
        outcomes,
        [json!("duplicate"), json!("duplicate"), json!("accepted")]
    );
    let first_row = deliveries[2]["id"].clone();
    for replayed in &deliveries[..2] {
        assert_eq!(replayed["duplicate_of"], first_row);
        assert_eq!(replayed["jobs"], first["jobs"]);
        assert_eq!(
            replayed["reason"],
            "payload already recorded under another delivery id"
        );
    }
    // A replay holds no delivery id: the genuine delivery d-2, with its
    // own body, is still taken.
    let (status, _) = app
        .send(github("issues", "d-2", labeled_issue("forgehand", 8)))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
}

/// Gitea and Forgejo share their secrets: a Gitea body sent again with
/// Forgejo's headers is the same signed body.
#[tokio::test]
async fn a_gitea_body_replayed_as_forgejo_is_a_duplicate() {
    let app = TestApp::new().await;
    let payload = serde_json::to_vec(&testdata_json(
        "gitea/webhook-examples/drone-go-scm/issue_comment_created.json",
    ))
    .unwrap();
    let (status, _) = app
        .send(gitea(
            "/webhooks/gitea",
            "issue_comment",
            "g-1",
            payload.clone(),
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let mut forgejo = gitea("/webhooks/forgejo", "issue_comment", "f-1", payload);
    for (k, v) in [
        ("x-forgejo-event", "issue_comment"),
        ("x-forgejo-delivery", "f-1"),
    ] {
        forgejo.headers_mut().insert(k, v.parse().unwrap());
    }
    let (status, answer) = app.send(forgejo).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["outcome"], "duplicate");
}

#[tokio::test]
async fn a_replay_after_the_first_delivery_was_pruned_is_still_a_duplicate() {
    let app = TestApp::new().await;
    let body = labeled_issue("forgehand", 9);
    let (status, _) = app.send(github("issues", "p-1", body.clone())).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // The job runs and finishes; then the delivery and the job are past
    // their retention, the digest is not.
    let claimed = app
        .store
        .claim_job("w", Duration::from_secs(60))
        .await
        .unwrap()
        .expect("the job is waiting");
    let finished = Finish::Succeeded { result: json!({}) };
    assert!(app.store.finish_job(&claimed, "w", finished).await.unwrap());
    let later = forgehand_bot::time::now_ms() + 1000;
    let pruned = app
        .store
        .prune(&Retention {
            deliveries_before: later,
            refused_before: later,
            jobs_before: later,
            digests_before: 0,
        })
        .await
        .unwrap();
    assert_eq!((pruned.deliveries, pruned.jobs, pruned.digests), (1, 1, 0));
    assert_eq!(app.count("deliveries").await, 0);
    assert_eq!(app.count("jobs").await, 0);

    // Under a new delivery id, and under the first one (its row is gone,
    // so the id alone would not tell).
    for id in ["p-2", "p-1"] {
        let (status, answer) = app.send(github("issues", id, body.clone())).await;
        assert_eq!(status, StatusCode::OK, "{id}: {answer}");
        assert_eq!(answer["outcome"], "duplicate");
        assert_eq!(answer["jobs"], json!([]));
    }
    assert_eq!(app.count("jobs").await, 0, "no new job");
}

#[tokio::test]
async fn a_body_older_than_the_digest_retention_is_refused() {
    let app = TestApp::with(|c| {
        c.database.retention_days = 10;
        c.database.digest_retention_days = 30;
    })
    .await;
    let (status, answer) = app
        .send(github(
            "issues",
            "old-1",
            issue_at(1, &rfc3339_days_ago(31)),
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("database.digest_retention_days"),
        "{answer}"
    );
    // Inside the window it is taken.
    let (status, answer) = app
        .send(github(
            "issues",
            "new-1",
            issue_at(2, &rfc3339_days_ago(29)),
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");

    // The newest of its timestamps counts: an issue opened long ago and
    // commented on now is fresh.
    let mut comment = testdata_json("github/webhook-examples/issue_comment/created.1.json");
    comment["issue"]["created_at"] = json!(rfc3339_days_ago(400));
    comment["comment"]["body"] = json!("@forgehand please look");
    let (status, answer) = app
        .send(github(
            "issue_comment",
            "new-2",
            serde_json::to_vec(&comment).unwrap(),
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");

    let mut review = testdata_json("github/webhook-examples/pull_request_review/submitted.1.json");
    stamp(&mut review, &rfc3339_days_ago(45));
    let (status, _) = app
        .send(github(
            "pull_request_review",
            "old-2",
            serde_json::to_vec(&review).unwrap(),
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(app.jobs().await.len(), 2);
}
