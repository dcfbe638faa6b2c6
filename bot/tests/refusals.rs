//! What a caller without the secret leaves in the database: a refusal
//! record of bounded size, at a bounded rate, whatever it sends.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;

/// Bytes of one delivery row's text and blob columns, as SQLite holds them.
async fn row_sizes(app: &TestApp) -> Vec<i64> {
    sqlx::query_scalar(
        "SELECT coalesce(length(CAST(forge AS BLOB)), 0) + coalesce(length(CAST(delivery_id AS BLOB)), 0) \
         + coalesce(length(CAST(event AS BLOB)), 0) + coalesce(length(CAST(event_name AS BLOB)), 0) \
         + coalesce(length(CAST(reason AS BLOB)), 0) + coalesce(length(CAST(repo AS BLOB)), 0) \
         + coalesce(length(CAST(sender AS BLOB)), 0) + coalesce(length(CAST(detail AS BLOB)), 0) \
         + coalesce(length(payload), 0) FROM deliveries ORDER BY id",
    )
    .fetch_all(app.sqlite.pool())
    .await
    .unwrap()
}

/// The most a refusal record holds: the forge, a 128-byte delivery id, a
/// 64-byte event header and a 256-byte reason.
const MAX_RECORD: i64 = 8 + 128 + 64 + 256;

fn big(c: char) -> String {
    std::iter::repeat_n(c, 60 * 1024).collect()
}

#[tokio::test]
async fn a_refusal_record_has_a_bounded_size_whatever_the_headers() {
    let app = TestApp::new().await;
    let huge_id = big('i');
    let huge_event = big('e');

    // Unsigned, with 60 KB headers of every kind the record might copy.
    let unsigned = Request::post("/webhooks/github")
        .header("x-github-event", &huge_event)
        .header("x-github-delivery", &huge_id)
        .header("x-padding", big('p'))
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(app.send(unsigned).await.0, StatusCode::UNAUTHORIZED);

    // A 60 KB signature header that is not one.
    let garbled = Request::post("/webhooks/github")
        .header("x-github-event", &huge_event)
        .header("x-github-delivery", &huge_id)
        .header("x-hub-signature-256", format!("sha256={}", big('z')))
        .body(Body::from("{}"))
        .unwrap();
    let (status, answer) = app.send(garbled).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(answer.to_string().len() < 1024, "the answer is bounded too");

    // Gitea's headers, 60 KB each.
    let gitea = Request::post("/webhooks/gitea")
        .header("x-gitea-event", &huge_event)
        .header("x-gitea-delivery", &huge_id)
        .header("x-gitea-signature", big('0'))
        .body(Body::from("{}"))
        .unwrap();
    assert_eq!(app.send(gitea).await.0, StatusCode::UNAUTHORIZED);

    // Correctly signed, but with 60 KB delivery and event headers: the
    // signature covers the body only, so these are refused too.
    let mut signed = github("issues", "short", labeled_issue("forgehand", 1));
    signed
        .headers_mut()
        .insert("x-github-delivery", huge_id.parse().unwrap());
    let (status, answer) = app.send(signed).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let mut signed = github("issues", "short-2", labeled_issue("forgehand", 1));
    signed
        .headers_mut()
        .insert("x-github-event", huge_event.parse().unwrap());
    let (status, answer) = app.send(signed).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");

    let sizes = row_sizes(&app).await;
    assert_eq!(sizes.len(), 5, "every refusal is recorded");
    for size in sizes {
        assert!(size <= MAX_RECORD, "a refusal record of {size} bytes");
    }
    // What is kept of a header is its start.
    let deliveries = app.deliveries().await;
    let id = deliveries[1]["delivery_id"].as_str().unwrap();
    assert!(id.starts_with("iii") && id.len() <= 128, "{id}");
    let event = deliveries[0]["event"].as_str().unwrap();
    assert!(event.starts_with("eee") && event.len() <= 64, "{event}");
    assert!(app.jobs().await.is_empty());
}

#[tokio::test]
async fn a_flood_of_refusals_past_the_rate_limit_adds_a_bucket_of_rows_and_is_counted() {
    let app = TestApp::with(|c| {
        c.server.refusal_records_burst = 5;
        // No token comes back while the test runs.
        c.server.refusal_records_per_minute = 1;
    })
    .await;
    for n in 0..50 {
        let unsigned = Request::post("/webhooks/github")
            .header("x-github-event", "issues")
            .header("x-github-delivery", format!("flood-{n}"))
            .header("x-padding", big('p'))
            .body(Body::from("{}"))
            .unwrap();
        assert_eq!(app.send(unsigned).await.0, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(app.count("deliveries").await, 5);

    // A genuine delivery is still recorded: the bucket is for refusals.
    let (status, _) = app
        .send(github("issues", "genuine", labeled_issue("forgehand", 3)))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(app.count("deliveries").await, 6);

    let metrics = app.metrics().await;
    for line in [
        "forgehand_webhook_refusals_recorded_total 5",
        "forgehand_webhook_refusals_unrecorded_total 45",
        r#"forgehand_webhook_deliveries_total{forge="github",event="unverified",outcome="rejected"} 50"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing `{line}` in:\n{metrics}"
        );
    }
}

/// The event header is not signed: replayed bodies under made-up event
/// names must not each become a metrics label.
#[tokio::test]
async fn made_up_event_headers_do_not_become_metrics_labels() {
    let app = TestApp::new().await;
    for n in 0..20 {
        let body = format!(r#"{{"zen":"z","hook_id":{n}}}"#);
        let (status, answer) = app
            .send(github(&format!("made-up-{n}"), &format!("m-{n}"), body))
            .await;
        assert!(status.is_success(), "{answer}");
    }
    let metrics = app.metrics().await;
    assert!(!metrics.contains("made-up"), "{metrics}");
    assert!(
        metrics.lines().any(|l| l
            == r#"forgehand_webhook_deliveries_total{forge="github",event="other",outcome="ignored"} 20"#),
        "{metrics}"
    );
}

/// The log is a sink too: refusals are logged at the rate they are
/// recorded, and what is logged of one is bounded.
#[tokio::test]
async fn refusals_are_logged_at_the_rate_they_are_recorded() {
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let app = TestApp::with(|c| {
        c.server.refusal_records_burst = 3;
        c.server.refusal_records_per_minute = 1;
    })
    .await;
    for n in 0..30 {
        let unsigned = Request::post("/webhooks/github")
            .header("x-github-event", big('e'))
            .header("x-github-delivery", format!("{n}-{}", big('i')))
            .body(Body::from("{}"))
            .unwrap();
        assert_eq!(app.send(unsigned).await.0, StatusCode::UNAUTHORIZED);
    }
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("delivery refused"))
        .collect();
    assert_eq!(refused.len(), 3, "{text}");
    for line in refused {
        assert!(line.len() < 1024, "a log line of {} bytes", line.len());
    }
}
