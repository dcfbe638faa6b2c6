//! The fake forge's webhooks. Every change it announces (a test's label,
//! assignment, comment or review here; the bot's own calls through the
//! API in `api_calls`) arrives in order, with the real forge's headers
//! and signature, and parses into the event Forgehand expects; and the
//! real service, fed by them, acts on its label and not on its own
//! comment (`serve`).

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::Router;
use forgehand_forge::api::gitea::GiteaClient;
use forgehand_forge::api::github::{GitHubAuth, GitHubClient};
use forgehand_forge::api::ForgeApi;
use forgehand_forge::webhook::signature::{decode_signature, sign_hex, verify};
use forgehand_forge::webhook::{DeliveryHeaders, ForgeKind};
use forgehand_forge::{parse_delivery, CommentAction, Event, IssueAction, Repo, ReviewState};
use forgehand_tests::fake_forge::{Delivery, FakeForge, Kind};
use forgehand_tests::local_server::LocalServer;
use secrecy::SecretString;
use serde_json::json;

#[path = "fake_webhooks/api_calls.rs"]
mod api_calls;
#[path = "fake_webhooks/serve.rs"]
mod serve;

const SECRET: &str = "hook-secret";
const TOKEN: &str = "bot-token-0123456789abcdef";
const REPO: &str = "acme/demo";
const CLONE_URL: &str = "http://git.test/acme/demo.git";

/// A hook receiver that answers 200 and keeps what it got.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
    _server: LocalServer,
}

async fn receiver() -> Receiver {
    let got: Arc<Mutex<Vec<(HeaderMap, Bytes)>>> = Arc::default();
    let keep = got.clone();
    let app = Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
        let keep = keep.clone();
        async move {
            keep.lock().unwrap().push((headers, body));
            "ok"
        }
    });
    let server = LocalServer::start(app).await.unwrap();
    Receiver {
        url: format!("{}/hook", server.base_url),
        got,
        _server: server,
    }
}

/// A fake forge with issue #1, pull request #2 (`fast` into `main`), the
/// bot's token (acting as `bot`) and a hook to `url` signed with `secret`.
async fn forge(kind: Kind, url: &str, secret: &str, bot: &str) -> FakeForge {
    let forge = FakeForge::start(kind).await.unwrap();
    forge.with(|s| {
        s.bot_token(kind, REPO, TOKEN, bot);
        s.add_issue(REPO, "maintainer", "Fix add", "add() subtracts.");
        let pr = json!({"title": "Speed up", "body": "Faster.", "head": "fast", "base": "main"});
        s.open_pull(REPO, "contributor", &pr).unwrap();
    });
    forge.set_clone_url(REPO, CLONE_URL);
    // The repository's branches, as the forge knows them, and a
    // collaborator to ask for a review.
    let git = tempfile::tempdir().unwrap();
    forge.make_git(REPO, git.path(), &["main", "fast", "forgehand/issue-1"]);
    forge.hold(git);
    forge.with(|s| {
        s.permissions
            .insert((REPO.into(), "maintainer".into()), "write".into());
    });
    forge.add_webhook(url, secret);
    forge
}

fn client(kind: Kind, forge: &FakeForge) -> Box<dyn ForgeApi> {
    let token = SecretString::from(TOKEN);
    match kind {
        Kind::GitHub => {
            Box::new(GitHubClient::new(&forge.base_url, GitHubAuth::Token(token)).unwrap())
        }
        Kind::Gitea => Box::new(GiteaClient::new(&forge.base_url, token).unwrap()),
    }
}

/// Checks `d`'s headers and signature as the forge's documentation says
/// they are, then parses it as Forgehand does.
fn open(kind: Kind, d: &Delivery, secret: &str) -> Event {
    let read = DeliveryHeaders::read(|name| d.header(name));
    let forge = match kind {
        Kind::GitHub => ForgeKind::Github,
        Kind::Gitea => ForgeKind::Gitea,
    };
    assert_eq!(read.forge, forge, "{:?}", d.headers);
    let (_, value) = read.signature.clone().expect("a signature header");
    let signature = decode_signature(&value, read.signature_is_prefixed()).unwrap();
    verify(&d.body, &signature, &[SecretString::from(secret)]).expect("signed with the secret");
    let other = [SecretString::from("another secret")];
    assert!(verify(&d.body, &signature, &other).is_err());
    let hex = sign_hex(secret.as_bytes(), &d.body);
    let prefixed = format!("sha256={hex}");
    assert_eq!(d.header("x-hub-signature-256"), Some(prefixed.as_str()));
    assert_eq!(d.header("content-type"), Some("application/json"));
    assert_eq!(read.delivery_id.as_deref(), Some(d.delivery_id.as_str()));
    assert!(
        uuid::Uuid::parse_str(&d.delivery_id).is_ok(),
        "{}",
        d.delivery_id
    );
    assert_eq!(read.event.as_deref(), Some(d.event.as_str()));
    assert_eq!(d.header("x-github-event"), Some(d.event.as_str()));
    assert_eq!(d.json()["action"].as_str(), d.action.as_deref());
    match kind {
        Kind::GitHub => {
            let agent = d.header("user-agent").unwrap();
            let build = agent.strip_prefix("GitHub-Hookshot/").unwrap();
            assert!(!build.is_empty() && build.chars().all(|c| c.is_ascii_hexdigit()));
            let hook = d.hook_id.to_string();
            assert_eq!(d.header("x-github-hook-id"), Some(hook.as_str()));
        }
        Kind::Gitea => {
            for name in ["x-gitea-signature", "x-gogs-signature"] {
                assert_eq!(d.header(name), Some(hex.as_str()), "{name}");
            }
            for name in ["x-gogs-delivery", "x-github-delivery"] {
                assert_eq!(d.header(name), Some(d.delivery_id.as_str()), "{name}");
            }
            assert_eq!(d.header("x-gogs-event"), Some(d.event.as_str()));
        }
    }
    parse_delivery(forge, &d.event, &d.body)
        .unwrap_or_else(|e| panic!("{} {:?}: {e}", d.event, d.action))
}

/// What the tests expect of every payload's repository.
fn check_repo(repo: &Repo) {
    assert_eq!(repo.full_name(), REPO);
    assert_eq!(repo.clone_url.as_deref(), Some(CLONE_URL));
    assert_eq!(repo.default_branch.as_deref(), Some("main"));
}

fn gitea_type(d: &Delivery) -> Option<&str> {
    d.header("x-gitea-event-type")
}

async fn changes_in_the_test(kind: Kind) {
    let hook = receiver().await;
    let forge = forge(kind, &hook.url, SECRET, "forgehand").await;
    forge.label_issue(REPO, 1, "forgehand", "maintainer");
    forge.assign_issue(REPO, 1, "forgehand", "maintainer");
    let on_issue = forge.comment(REPO, 1, "maintainer", "@forgehand please");
    let on_pull = forge.comment(REPO, 2, "reviewer", "Looks slow.");
    let changes = match kind {
        Kind::GitHub => "CHANGES_REQUESTED",
        Kind::Gitea => "REQUEST_CHANGES",
    };
    let thread = [("calc.sh", 2, "Say how.")];
    let review = forge.submit_review(REPO, 2, "reviewer", changes, "Document it.", &thread);
    forge.submit_review(REPO, 2, "owner", "APPROVED", "", &[]);
    forge.settle().await;

    let ds = forge.deliveries();
    assert_eq!(ds.len(), 6, "{ds:#?}");
    assert!(ds.iter().all(|d| d.status == Some(200)), "{ds:#?}");
    let got = hook.got.lock().unwrap().clone();
    let arrived: Vec<(&str, &[u8])> = got
        .iter()
        .map(|(h, b)| (h["x-github-delivery"].to_str().unwrap(), b.as_ref()))
        .collect();
    let sent: Vec<(&str, &[u8])> = ds
        .iter()
        .map(|d| (d.delivery_id.as_str(), &d.body[..]))
        .collect();
    assert_eq!(arrived, sent, "the receiver got each delivery, in order");
    forge.with(|s| {
        assert_eq!(
            (s.issues[0].labels.clone(), s.issues[0].assignees.clone()),
            (vec!["forgehand".to_owned()], vec!["forgehand".to_owned()])
        );
        assert_eq!(s.review_comments.len(), 1);
    });
    let events: Vec<Event> = ds.iter().map(|d| open(kind, d, SECRET)).collect();
    let github = kind == Kind::GitHub;

    let Event::Issue {
        action: IssueAction::Labeled,
        repo,
        sender,
        issue,
        label,
        ..
    } = &events[0]
    else {
        panic!("not labeled: {:?}", events[0]);
    };
    check_repo(repo);
    assert_eq!(
        (sender.login.as_str(), issue.number, issue.is_pull_request),
        ("maintainer", 1, false)
    );
    assert_eq!(issue.labels, ["forgehand"]);
    // Gitea says only that the label set changed.
    assert_eq!(label.as_deref(), github.then_some("forgehand"));
    assert_eq!(ds[0].event, "issues");
    let action = if github { "labeled" } else { "label_updated" };
    assert_eq!(ds[0].action.as_deref(), Some(action));
    assert_eq!(gitea_type(&ds[0]), (!github).then_some("issue_label"));

    let Event::Issue {
        action: IssueAction::Assigned,
        issue,
        assignee,
        ..
    } = &events[1]
    else {
        panic!("not assigned: {:?}", events[1]);
    };
    assert_eq!(issue.assignees, ["forgehand"]);
    assert_eq!(
        assignee.as_ref().map(|a| a.login.as_str()),
        github.then_some("forgehand")
    );
    assert_eq!(gitea_type(&ds[1]), (!github).then_some("issue_assign"));

    for (i, id, number, by, text) in [
        (2, on_issue, 1, "maintainer", "@forgehand please"),
        (3, on_pull, 2, "reviewer", "Looks slow."),
    ] {
        let Event::IssueComment {
            action: CommentAction::Created,
            repo,
            sender,
            issue,
            comment,
        } = &events[i]
        else {
            panic!("not a new comment: {:?}", events[i]);
        };
        check_repo(repo);
        assert_eq!(
            (
                comment.id,
                comment.body.as_str(),
                comment.author.login.as_str()
            ),
            (id, text, by)
        );
        assert_eq!((sender.login.as_str(), issue.number), (by, number));
        assert_eq!(issue.is_pull_request, number == 2);
        assert_eq!(ds[i].event, "issue_comment");
    }
    match kind {
        Kind::GitHub => assert!(ds[3].json()["issue"]["pull_request"]["url"].is_string()),
        Kind::Gitea => {
            assert_eq!(
                (
                    ds[2].json()["is_pull"].clone(),
                    ds[3].json()["is_pull"].clone()
                ),
                (json!(false), json!(true))
            );
            assert_eq!(gitea_type(&ds[3]), Some("pull_request_comment"));
        }
    }

    for (i, state, by, body) in [
        (4, ReviewState::ChangesRequested, "reviewer", "Document it."),
        (5, ReviewState::Approved, "owner", ""),
    ] {
        let Event::ReviewSubmitted {
            repo,
            sender,
            pull_request,
            review_id,
            state: got,
            body: text,
        } = &events[i]
        else {
            panic!("not a review: {:?}", events[i]);
        };
        check_repo(repo);
        assert_eq!(
            (*got, sender.login.as_str(), text.as_str()),
            (state, by, body)
        );
        assert_eq!(
            (
                pull_request.number,
                pull_request.head_ref.as_str(),
                pull_request.base_ref.as_str()
            ),
            (2, "fast", "main")
        );
        // Gitea's review payload carries no review id.
        if i == 4 {
            assert_eq!(*review_id, github.then_some(review));
        }
    }
    let headers: Vec<&str> = ds[4..].iter().map(|d| d.event.as_str()).collect();
    match kind {
        Kind::GitHub => assert_eq!(headers, ["pull_request_review"; 2]),
        Kind::Gitea => {
            assert_eq!(headers, ["pull_request_rejected", "pull_request_approved"]);
            assert_eq!(gitea_type(&ds[4]), Some("pull_request_review_rejected"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_changes_in_the_test_are_delivered_signed() {
    changes_in_the_test(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitea_changes_in_the_test_are_delivered_signed() {
    changes_in_the_test(Kind::Gitea).await;
}
