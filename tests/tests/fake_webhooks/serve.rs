//! The real service, started in-process, fed by the fake's deliveries.

use forgehand_forge::api::RepoRef;
use forgehand_tests::fake_forge::{Delivery, Kind};
use forgehand_tests::harness::{TestServer, GITEA_SECRET, GITHUB_SECRET};
use serde_json::{json, Value};

use super::{client, forge, CLONE_URL, REPO, SECRET};

/// Forgehand's answer to a delivery (`outcome`, `jobs`, `reason`).
fn answer(d: &Delivery) -> Value {
    assert_eq!(d.status, Some(202), "{d:#?}");
    serde_json::from_str(d.answer.as_deref().unwrap()).unwrap()
}

async fn forgehand_serves_the_fake(kind: Kind) {
    let server = TestServer::start_with(|c| {
        c.bot.username = "helperbot".into();
        c.bot.label = "helperbot-fix".into();
    })
    .await;
    let (path, secret) = match kind {
        Kind::GitHub => ("/webhooks/github", GITHUB_SECRET),
        Kind::Gitea => ("/webhooks/gitea", GITEA_SECRET),
    };
    let forge = forge(kind, &server.url(path), secret, "helperbot").await;
    forge.label_issue(REPO, 1, "bug", "maintainer");
    forge.label_issue(REPO, 1, "helperbot-fix", "maintainer");
    forge.settle().await;
    let ds = forge.deliveries();
    assert_eq!(
        (
            answer(&ds[0])["outcome"].clone(),
            answer(&ds[1])["outcome"].clone()
        ),
        (json!("ignored"), json!("accepted"))
    );
    let jobs = server.jobs().await;
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert_eq!(jobs[0]["kind"], "labeled");
    assert_eq!(jobs[0]["payload"]["target"], 1);
    assert_eq!(jobs[0]["payload"]["requested_by"], "maintainer");
    assert_eq!(jobs[0]["payload"]["repo"]["clone_url"], CLONE_URL);

    // The bot's own comment would be a request from anyone else.
    let request = "@helperbot fix the tests too";
    let api = client(kind, &forge);
    api.create_comment(&RepoRef::new("acme", "demo"), 1, request)
        .await
        .unwrap();
    forge.settle().await;
    let own = &forge.deliveries()[2];
    assert_eq!(answer(own)["outcome"], "ignored");
    assert_eq!(answer(own)["reason"], "sent by the bot itself");
    assert_eq!(server.jobs().await.len(), 1);
    forge.comment(REPO, 1, "maintainer", request);
    forge.settle().await;
    let jobs = server.jobs().await;
    assert_eq!(jobs.len(), 2, "{jobs:#?}");
    assert_eq!(jobs[0]["payload"]["requested_by"], "maintainer");

    let mut recorded: Vec<String> = server
        .deliveries()
        .await
        .iter()
        .map(|d| d["delivery_id"].as_str().unwrap().to_owned())
        .collect();
    let mut sent: Vec<String> = forge
        .deliveries()
        .into_iter()
        .map(|d| d.delivery_id)
        .collect();
    recorded.sort();
    sent.sort();
    assert_eq!(
        recorded, sent,
        "Forgehand recorded each delivery under the forge's id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgehand_acts_on_a_github_label_and_not_on_its_own_comment() {
    forgehand_serves_the_fake(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgehand_acts_on_a_gitea_label_and_not_on_its_own_comment() {
    forgehand_serves_the_fake(Kind::Gitea).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused_and_an_unreachable_hook_is_an_error() {
    let server = TestServer::start().await;
    for (kind, path) in [
        (Kind::GitHub, "/webhooks/github"),
        (Kind::Gitea, "/webhooks/gitea"),
    ] {
        let forge = forge(
            kind,
            &server.url(path),
            "not the configured secret",
            "forgehand",
        )
        .await;
        // Nothing listens on the discard port.
        forge.add_webhook("http://127.0.0.1:9/hook", SECRET);
        forge.label_issue(REPO, 1, "forgehand", "maintainer");
        forge.settle().await;
        let ds = forge.deliveries();
        assert_eq!(ds.len(), 2, "one delivery per hook");
        assert_eq!(ds[0].status, Some(401), "{:?}", ds[0].answer);
        assert!(
            ds[1].status.is_none() && ds[1].error.is_some(),
            "{:?}",
            ds[1]
        );
        assert_ne!(ds[0].delivery_id, ds[1].delivery_id);
    }
    assert!(server.jobs().await.is_empty());
}
