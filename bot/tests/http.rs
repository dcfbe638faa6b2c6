//! Every answer of the webhook endpoints, through the real router and a
//! real SQLite file, and what each leaves in the operator API.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use serde_json::{json, Value};

#[tokio::test]
async fn a_labeled_issue_is_accepted_with_one_job() {
    let app = TestApp::new().await;
    let (status, body) = app
        .send(github("issues", "d-1", labeled_issue("forgehand", 7)))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["outcome"], "accepted");
    assert_eq!(body["jobs"].as_array().unwrap().len(), 1);

    let delivery = &app.deliveries().await[0];
    assert_eq!(delivery["delivery_id"], "d-1");
    assert_eq!(delivery["forge"], "github");
    assert_eq!(delivery["event"], "issues");
    assert_eq!(delivery["event_name"], "issues.labeled");
    assert_eq!(delivery["outcome"], "accepted");
    assert_eq!(delivery["detail"], "label:forgehand");
    assert_eq!(delivery["target"], 7);
    assert_eq!(delivery["jobs"], body["jobs"]);

    let jobs = app.jobs().await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["state"], "queued");
    assert_eq!(jobs[0]["kind"], "labeled");
    assert_eq!(jobs[0]["payload"]["target"], 7);
}

#[tokio::test]
async fn a_redelivered_id_answers_200_and_makes_no_second_job() {
    let app = TestApp::new().await;
    let (first, body) = app
        .send(github("issues", "same-id", labeled_issue("forgehand", 7)))
        .await;
    assert_eq!(first, StatusCode::ACCEPTED);
    let (again, again_body) = app
        .send(github("issues", "same-id", labeled_issue("forgehand", 7)))
        .await;
    assert_eq!(again, StatusCode::OK, "{again_body}");
    assert_eq!(again_body["outcome"], "duplicate");
    assert_eq!(again_body["jobs"], body["jobs"]);
    assert_eq!(app.jobs().await.len(), 1);
    let outcomes: Vec<_> = app
        .deliveries()
        .await
        .iter()
        .map(|d| d["outcome"].clone())
        .collect();
    assert_eq!(outcomes, [json!("duplicate"), json!("accepted")]);
    assert_eq!(app.deliveries().await[0]["jobs"], body["jobs"]);
}

#[tokio::test]
async fn events_forgehand_does_not_act_on_are_ignored_with_202() {
    let app = TestApp::new().await;
    let (status, body) = app
        .send(github("issues", "d-2", labeled_issue("bug", 7)))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["outcome"], "ignored");
    assert!(
        body["reason"].as_str().unwrap().contains("not labeled"),
        "{body}"
    );
    let (status, body) = app
        .send(github("push", "d-3", r#"{"ref":"refs/heads/main"}"#))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["outcome"], "ignored");
    assert!(app.jobs().await.is_empty());
    assert_eq!(app.deliveries().await[0]["outcome"], "ignored");
}

#[tokio::test]
async fn unsigned_and_wrongly_signed_deliveries_are_refused_with_401_and_recorded() {
    let app = TestApp::new().await;
    let body = labeled_issue("forgehand", 7);

    let mut unsigned = github("issues", "u-1", body.clone());
    unsigned.headers_mut().remove("x-hub-signature-256");
    let (status, answer) = app.send(unsigned).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        answer,
        json!({"outcome": "rejected", "error": "missing X-Hub-Signature-256 header"})
    );

    let (status, answer) = app
        .send(github_signed_with(
            "not-the-secret",
            "issues",
            "u-2",
            body.clone(),
        ))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(answer["error"], "signature does not match");

    let mut garbled = github("issues", "u-3", body.clone());
    garbled
        .headers_mut()
        .insert("x-hub-signature-256", "md5=abc".parse().unwrap());
    let (status, answer) = app.send(garbled).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(answer["error"], "malformed x-hub-signature-256 header");

    // A refused delivery id does not block the genuine delivery later.
    let (status, _) = app.send(github("issues", "u-2", body)).await;
    assert_eq!(status, StatusCode::ACCEPTED);

    let deliveries = app.deliveries().await;
    let outcomes: Vec<_> = deliveries
        .iter()
        .map(|d| (d["outcome"].clone(), d["status_code"].clone()))
        .collect();
    assert_eq!(
        outcomes,
        [
            (json!("accepted"), json!(202)),
            (json!("rejected"), json!(401)),
            (json!("rejected"), json!(401)),
            (json!("rejected"), json!(401))
        ]
    );
    assert_eq!(app.jobs().await.len(), 1);
}

#[tokio::test]
async fn every_rotated_secret_verifies() {
    let app = TestApp::new().await;
    let (status, _) = app
        .send(github_signed_with(
            "old-github-secret",
            "issues",
            "r-1",
            labeled_issue("forgehand", 1),
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = app
        .send(github_signed_with(
            GITEA_SECRET,
            "issues",
            "r-2",
            labeled_issue("forgehand", 1),
        ))
        .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a Gitea secret must not verify GitHub deliveries"
    );
}

#[tokio::test]
async fn missing_headers_and_malformed_json_are_400_after_the_signature_holds() {
    let app = TestApp::new().await;
    let body = labeled_issue("forgehand", 7);

    let mut no_event = github("issues", "h-1", body.clone());
    no_event.headers_mut().remove("x-github-event");
    let (status, answer) = app.send(no_event).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(answer["error"], "missing X-GitHub-Event header");

    let mut no_delivery = github("issues", "h-2", body.clone());
    no_delivery.headers_mut().remove("x-github-delivery");
    let (status, answer) = app.send(no_delivery).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(answer["error"], "missing X-GitHub-Delivery header");

    let (status, answer) = app.send(github("issues", "h-3", "{not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let error = answer["error"].as_str().unwrap();
    assert!(error.starts_with("malformed payload: "), "{error}");
    assert!(!error.contains("src/"), "no internals in answers: {error}");

    let (status, answer) = app.send(github("issues", "h-4", "{}")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");

    // Unsigned and without headers: authentication comes first.
    let mut bare = Request::post("/webhooks/github")
        .body(Body::from("{}"))
        .unwrap();
    bare.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    let (status, _) = app.send(bare).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let rejected: Vec<_> = app
        .deliveries()
        .await
        .iter()
        .map(|d| d["status_code"].clone())
        .collect();
    assert_eq!(
        rejected,
        [json!(401), json!(400), json!(400), json!(400), json!(400)]
    );
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let app = TestApp::new().await;
    let huge = vec![b' '; 25 * 1024 * 1024 + 1];
    let (status, answer) = app.send(github("issues", "big-1", huge)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(answer["outcome"], "rejected");
    // Exactly at the limit is still read (and then fails as JSON).
    let mut at_limit = labeled_issue("forgehand", 3);
    at_limit.resize(25 * 1024 * 1024, b' ');
    let (status, answer) = app.send(github("issues", "big-2", at_limit)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let statuses: Vec<_> = app
        .deliveries()
        .await
        .iter()
        .map(|d| d["status_code"].clone())
        .collect();
    assert_eq!(statuses, [json!(202), json!(413)]);
}

#[tokio::test]
async fn gitea_is_recognised_by_its_own_headers_and_its_own_secret() {
    let app = TestApp::new().await;
    let payload = serde_json::to_vec(&testdata_json(
        "gitea/webhook-examples/drone-go-scm/issue_comment_created.json",
    ))
    .unwrap();
    let (status, body) = app
        .send(gitea(
            "/webhooks/gitea",
            "issue_comment",
            "g-1",
            payload.clone(),
        ))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let delivery = &app.deliveries().await[0];
    assert_eq!(delivery["forge"], "gitea");
    assert_eq!(delivery["event_name"], "issue_comment.created");

    // Sent to the GitHub endpoint it is refused with a pointer, not
    // mistaken for GitHub's.
    let (status, body) = app
        .send(gitea(
            "/webhooks/github",
            "issue_comment",
            "g-2",
            payload.clone(),
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"].as_str().unwrap().contains("/webhooks/gitea"),
        "{body}"
    );

    // Forgejo's own headers make it Forgejo. (Another comment: the same
    // body again, under any headers, would be a replay.)
    let mut other_comment: Value = serde_json::from_slice(&payload).unwrap();
    other_comment["comment"]["id"] = json!(999);
    let payload = serde_json::to_vec(&other_comment).unwrap();
    let mut forgejo = gitea("/webhooks/gitea", "issue_comment", "f-1", payload);
    for (k, v) in [
        ("x-forgejo-event", "issue_comment"),
        ("x-forgejo-delivery", "f-1"),
    ] {
        forgejo.headers_mut().insert(k, v.parse().unwrap());
    }
    let sig = forgejo.headers()["x-gitea-signature"].clone();
    forgejo.headers_mut().insert("x-forgejo-signature", sig);
    let (status, _) = app.send(forgejo).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(app.deliveries().await[0]["forge"], "forgejo");
}

#[tokio::test]
async fn gitea_without_its_headers_or_signature_is_refused() {
    let app = TestApp::new().await;
    let (status, body) = app
        .send(github("issues", "x-1", labeled_issue("forgehand", 1)).map(|b| b))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let mut request = github("issues", "x-2", "{}");
    *request.uri_mut() = "/webhooks/gitea".parse().unwrap();
    let (status, body) = app.send(request).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "missing X-Gitea-Event (or X-Forgejo-Event) header"
    );

    let mut unsigned = gitea("/webhooks/gitea", "issues", "x-3", "{}");
    unsigned.headers_mut().remove("x-gitea-signature");
    let (status, body) = app.send(unsigned).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "missing X-Gitea-Signature header");
}

#[tokio::test]
async fn a_forge_without_secrets_refuses_everything() {
    let app = TestApp::with(|c| c.gitea.webhook_secret.clear()).await;
    let (status, body) = app
        .send(gitea("/webhooks/gitea", "issues", "n-1", "{}"))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "no webhook secret is configured for gitea");
}

fn vectors() -> Vec<Value> {
    let raw = std::fs::read(testdata().join("signatures/github-signature-vectors.json")).unwrap();
    serde_json::from_slice(&raw).unwrap()
}

/// The documented vectors sign bodies that are not webhook payloads: a
/// vector that verifies gets past 401 to the JSON check (400), one that
/// must be rejected stops at 401.
#[tokio::test]
async fn the_documented_signature_vectors() {
    let mut checked = 0;
    for vector in vectors() {
        if vector.get("algo").is_some() {
            continue; // legacy SHA-1: Forgehand accepts only SHA-256
        }
        let secret = vector["secret"].as_str().unwrap().to_owned();
        let app = TestApp::with(|c| c.github.webhook_secret = vec![secret.clone().into()]).await;
        let payload = vector["payload"].as_str().unwrap().to_owned();
        let must_reject = vector.get("must_reject").is_some();
        let header = vector["expected_header"].as_str().map(str::to_owned);
        if let Some(header) = header {
            let is_ping = payload.contains("\"zen\"");
            let request = Request::post("/webhooks/github")
                .header("x-github-event", if is_ping { "ping" } else { "issues" })
                .header("x-github-delivery", "v")
                .header("x-hub-signature-256", header)
                .body(Body::from(payload.clone()))
                .unwrap();
            let (status, body) = app.send(request).await;
            let expected = match (must_reject, is_ping) {
                (true, _) => StatusCode::UNAUTHORIZED,
                (false, true) => StatusCode::ACCEPTED,
                (false, false) => StatusCode::BAD_REQUEST,
            };
            assert_eq!(status, expected, "vector from {}: {body}", vector["source"]);
            checked += 1;
        }
        if let Some(headers) = vector.get("headers") {
            // Gitea's form: bare hex in X-Gitea-Signature, verified with
            // the Gitea secrets.
            let app = TestApp::with(|c| c.gitea.webhook_secret = vec![secret.clone().into()]).await;
            let sig = headers["X-Gitea-Signature"].as_str().unwrap();
            for (event_header, sig_header) in [
                ("x-gitea-event", "x-gitea-signature"),
                ("x-forgejo-event", "x-forgejo-signature"),
            ] {
                let request = Request::post("/webhooks/gitea")
                    .header(event_header, "issues")
                    .header("x-gitea-delivery", "v")
                    .header("x-forgejo-delivery", "v")
                    .header(sig_header, sig)
                    .header(
                        "x-hub-signature-256",
                        headers["X-Hub-Signature-256"].as_str().unwrap(),
                    )
                    .body(Body::from(payload.clone()))
                    .unwrap();
                let (status, body) = app.send(request).await;
                assert_eq!(status, StatusCode::BAD_REQUEST, "{sig_header} form: {body}");
                assert!(
                    body["error"]
                        .as_str()
                        .unwrap()
                        .starts_with("malformed payload"),
                    "{body}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(
        checked, 6,
        "every SHA-256 vector and both Gitea header forms were checked"
    );
}

#[tokio::test]
async fn the_operator_api_needs_the_bearer_token() {
    let app = TestApp::new().await;
    for path in ["/api/deliveries", "/api/jobs", "/api/jobs/1"] {
        let (status, _) = app
            .send(Request::get(path).body(Body::empty()).unwrap())
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        let wrong = Request::get(path)
            .header("authorization", "Bearer nope")
            .body(Body::empty())
            .unwrap();
        assert_eq!(app.send(wrong).await.0, StatusCode::UNAUTHORIZED, "{path}");
    }
    let (status, body) = app.get("/api/jobs/999").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "no job 999");

    let off = TestApp::with(|c| c.api.token = None).await;
    let (status, body) = off.get("/api/jobs").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["error"].as_str().unwrap().contains("api.token"));
}

#[tokio::test]
async fn the_api_filters_and_pages() {
    let app = TestApp::new().await;
    for n in 0..5 {
        app.send(github(
            "issues",
            &format!("p-{n}"),
            labeled_issue("forgehand", n),
        ))
        .await;
    }
    app.send(github_signed_with("bad", "issues", "p-x", "{}"))
        .await;
    let (_, body) = app.get("/api/deliveries?outcome=rejected").await;
    assert_eq!(body["deliveries"].as_array().unwrap().len(), 1);
    let (_, body) = app.get("/api/deliveries?limit=2").await;
    let page: Vec<_> = body["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect();
    assert_eq!(page.len(), 2);
    let (_, body) = app
        .get(&format!("/api/deliveries?limit=2&before={}", page[1]))
        .await;
    let next: Vec<_> = body["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_i64().unwrap())
        .collect();
    assert_eq!(next, [page[1] - 1, page[1] - 2]);
    let (_, body) = app.get("/api/jobs?state=queued").await;
    assert_eq!(body["jobs"].as_array().unwrap().len(), 5);
    let (_, body) = app.get("/api/jobs?state=running").await;
    assert!(body["jobs"].as_array().unwrap().is_empty());
    let (status, _) = app.get("/api/jobs?state=bogus").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let app = TestApp::new().await;
    app.send(github("issues", "m-1", labeled_issue("forgehand", 1)))
        .await;
    app.send(github("issues", "m-1", labeled_issue("forgehand", 1)))
        .await;
    app.send(github_signed_with("bad", "issues", "m-2", "{}"))
        .await;

    let (status, _) = app
        .send(Request::get("/healthz").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = app
        .send(Request::get("/readyz").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["database"], "ok");
    assert_eq!(body["role"], "intake+workers");

    let (status, body) = app
        .send(Request::get("/metrics").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let text = body.as_str().unwrap();
    for line in [
        r#"forgehand_webhook_deliveries_total{forge="github",event="issues",outcome="accepted"} 1"#,
        r#"forgehand_webhook_deliveries_total{forge="github",event="issues",outcome="duplicate"} 1"#,
        r#"forgehand_webhook_deliveries_total{forge="github",event="unverified",outcome="rejected"} 1"#,
        r#"forgehand_jobs{state="queued"} 1"#,
        r#"forgehand_jobs{state="dead"} 0"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in:\n{text}"
        );
    }
}

/// Bodies are kept only when `database.keep_payloads` says so.
#[tokio::test]
async fn accepted_bodies_are_kept_only_when_configured() {
    let body = labeled_issue("forgehand", 5);
    for keep in [false, true] {
        let app = TestApp::with(|c| c.database.keep_payloads = keep).await;
        let (status, _) = app.send(github("issues", "k-1", body.clone())).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let row = app.deliveries().await[0]["id"].as_i64().unwrap();
        let kept = app.store.delivery_payload(row).await.unwrap();
        assert_eq!(
            kept.as_deref(),
            keep.then_some(body.as_slice()),
            "keep_payloads = {keep}"
        );
    }
}
