//! Every real webhook payload in `../shared/testdata`, delivered to the
//! running service over HTTP with the headers and signature its forge
//! sends, and read back through the operator API field by field.
//!
//! What each real delivery must become is stated as data, one line per
//! payload, in `expected.jsonl` (what the forges' documentation says the
//! payload means: GitHub's `action`s, Gitea's event headers): no rule
//! here re-implements the trigger, so a payload Forgehand misreads shows
//! up as a difference. The built cases change real payloads (a command
//! in a real comment, the bot's label or assignment) and say what each
//! must become beside it.

mod cases;
mod expect;
mod report;
mod send;

use forgehand_tests::harness::{forgejo_headers, gitea_headers, github_headers, TestServer};
use forgehand_tests::testdata;
use serde_json::json;

use cases::{built_cases, gitea_examples, github_examples};
use report::{check_names, check_record, recorded, Report, Sent};
use send::{send_all, Planned};

/// The bot's username: the author of the pull request that the real
/// Gitea review examples review, so that those reviews are for the bot.
const BOT: &str = "jony";
/// The bot's label: the label that GitHub's `issues/labeled` examples add.
const LABEL: &str = "bug";

/// GitHub's example count (README of the shared test data).
const GITHUB_FILES: usize = 97;
/// Gitea's and Forgejo's example count.
const GITEA_FILES: usize = 62;

async fn server() -> TestServer {
    TestServer::start_with(|config| {
        config.bot.username = BOT.into();
        config.bot.label = LABEL.into();
    })
    .await
}

// ---- the tests ---------------------------------------------------------------------

/// One server takes every example and every built case; then the operator
/// API must show each delivery as expected, with its job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_payload_over_http_becomes_the_expected_delivery() {
    let server = server().await;
    let mut report = Report::default();

    let github = send_all(&server, github_examples(), &mut report).await;
    let gitea = send_all(&server, gitea_examples(), &mut report).await;
    let built = send_all(&server, built_cases(), &mut report).await;

    let all: Vec<&Sent> = github.iter().chain(&gitea).chain(&built).collect();
    let recorded = recorded(&server, &all, &mut report).await;
    for s in &all {
        check_record(&mut report, s, &recorded.rows, &recorded.jobs);
    }

    // No vacuous pass: everything was sent, and real payloads did trigger.
    assert_eq!(github.len(), GITHUB_FILES);
    assert_eq!(gitea.len(), GITEA_FILES);
    let forgejo = gitea.iter().filter(|s| s.expect.forge == "forgejo").count();
    assert_eq!(forgejo, 19, "woodpecker-forgejo examples sent as Forgejo");
    let replays = gitea
        .iter()
        .filter(|s| s.expect.replay_of.is_some())
        .count();
    assert_eq!(
        replays, 4,
        "woodpecker-gitea examples that are a woodpecker-forgejo file again"
    );
    let real_jobs: Vec<&str> = github
        .iter()
        .chain(&gitea)
        .filter(|s| s.expect.job.is_some())
        .map(|s| s.ctx.as_str())
        .collect();
    assert_eq!(
        real_jobs,
        [
            "github issues/labeled.1.json",
            "github issues/labeled.2.json",
            "gitea woodpecker-gitea/HookPullRequestReviewAck.json (pull_request_approved)",
            "gitea woodpecker-gitea/HookPullRequestReviewComment.json (pull_request_comment)",
            "gitea woodpecker-gitea/HookPullRequestReviewDeny.json (pull_request_rejected)",
        ],
        "the real payloads that must start jobs"
    );
    let built_jobs = built.iter().filter(|s| s.expect.job.is_some()).count();
    assert_eq!(built_jobs, 16, "built cases that must start jobs");
    report.finish("deliveries read back through the operator API");

    server.stop().await.expect("the server stops cleanly");
}

/// The label, assignee or review state of every GitHub labeled, assigned
/// and review delivery is on record, whether or not it started a job:
/// `detail` is `label:<name>`, `assignee:<login>` or `review:<state>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_delivery_names_its_label_assignee_or_review_state() {
    let server = server().await;
    let mut report = Report::default();
    let planned: Vec<Planned> = github_examples()
        .into_iter()
        .chain(gitea_examples())
        .chain(built_cases())
        .filter(|p| p.expect.names.is_some())
        .collect();
    assert!(
        planned.len() >= 15,
        "labeled, assigned and review deliveries: {}",
        planned.len()
    );
    let sent = send_all(&server, planned, &mut report).await;
    let all: Vec<&Sent> = sent.iter().collect();
    let recorded = recorded(&server, &all, &mut report).await;
    for s in &sent {
        check_names(&mut report, s, &recorded.rows);
    }
    report.finish("`detail` of labeled, assigned and review deliveries");
}

/// The harness signs as the forges do: GitHub's documented vector (and the
/// typo'd one that must not verify), and the same vector in the headers
/// Gitea and Forgejo send.
#[test]
fn the_harness_signs_like_the_forges() {
    let vectors = testdata::json("signatures/github-signature-vectors.json");
    let vectors = vectors.as_array().expect("a list of vectors");
    let mut checked = 0;
    for v in vectors {
        let (Some(secret), Some(payload)) = (v["secret"].as_str(), v["payload"].as_str()) else {
            continue;
        };
        let header = |headers: &[(String, String)], name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let github = github_headers(secret, "ping", "d", payload.as_bytes());
        if let Some(want) = v["expected_header"]
            .as_str()
            .filter(|h| h.starts_with("sha256="))
        {
            let got = header(&github, "x-hub-signature-256").expect("signed");
            if v["must_reject"] == json!(true) {
                assert_ne!(got, want, "{}", v["source"]);
            } else {
                assert_eq!(got, want, "{}", v["source"]);
            }
            checked += 1;
        }
        if let Some(want) = v["headers"].as_object() {
            let gitea = gitea_headers(secret, "push", "d", payload.as_bytes());
            let forgejo = forgejo_headers(secret, "push", "d", payload.as_bytes());
            for name in ["X-Gitea-Signature", "X-Hub-Signature-256"] {
                assert_eq!(
                    header(&gitea, name).as_deref(),
                    want[name].as_str(),
                    "gitea {name}"
                );
                assert_eq!(
                    header(&forgejo, name).as_deref(),
                    want[name].as_str(),
                    "forgejo {name}"
                );
            }
            let bare = want["X-Gitea-Signature"].as_str();
            assert_eq!(header(&forgejo, "X-Forgejo-Signature").as_deref(), bare);
            assert_eq!(header(&gitea, "X-Gogs-Signature").as_deref(), bare);
            checked += 1;
        }
    }
    assert_eq!(checked, 5, "signature vectors checked");
}
