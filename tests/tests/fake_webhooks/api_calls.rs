//! The bot's own calls through the API are announced as the real forge
//! announces them, with the bot as the sender: what lets Forgehand
//! recognise, and ignore, its own actions.

use forgehand_forge::api::{NewPullRequest, RepoRef};
use forgehand_forge::{CommentAction, Event, PullRequestAction, ReviewState};
use forgehand_tests::fake_forge::Kind;
use serde_json::json;

use super::{check_repo, client, forge, open, receiver, REPO, SECRET};

async fn the_bots_api_calls(kind: Kind) {
    let hook = receiver().await;
    // A GitHub App acts as `name[bot]`, a user of type Bot.
    let bot = match kind {
        Kind::GitHub => "forgehand[bot]",
        Kind::Gitea => "forgehand",
    };
    let forge = forge(kind, &hook.url, SECRET, bot).await;
    let api = client(kind, &forge);
    let repo = RepoRef::new("acme", "demo");
    let comment = api.create_comment(&repo, 1, "On it.").await.unwrap();
    api.edit_comment(&repo, comment.id, "On it: working.")
        .await
        .unwrap();
    let mut new = NewPullRequest {
        title: "Fix add",
        body: "Fixes #1.",
        head: "forgehand/issue-1",
        base: "main",
        draft: false,
    };
    let pr = api.open_pull_request(&repo, &new).await.unwrap();
    new.title = "Fix add()";
    api.open_pull_request(&repo, &new).await.unwrap();
    api.request_review(&repo, pr.number, &["maintainer"])
        .await
        .unwrap();
    forge.submit_review(
        REPO,
        2,
        "maintainer",
        "COMMENT",
        "",
        &[("calc.sh", 2, "Why?")],
    );
    let thread = api.review_comments(&repo, 2).await.unwrap().remove(0);
    api.reply_to_review_comment(&repo, 2, &thread, "Because.")
        .await
        .unwrap();
    forge.settle().await;
    assert_eq!(forge.violations(), Vec::<String>::new());

    let ds = forge.deliveries();
    assert_eq!(ds.len(), 7, "{ds:#?}");
    let events: Vec<Event> = ds.iter().map(|d| open(kind, d, SECRET)).collect();
    for (i, event) in events.iter().enumerate().filter(|(i, _)| *i != 5) {
        let sender = event.sender().unwrap();
        assert_eq!(sender.login, bot, "{event:?}");
        assert_eq!(sender.is_bot, kind == Kind::GitHub, "{event:?}");
        check_repo(event.repo().unwrap());
        assert!(ds[i].status == Some(200));
    }
    let Event::IssueComment {
        action: CommentAction::Created,
        comment: c,
        issue,
        ..
    } = &events[0]
    else {
        panic!("not a new comment: {:?}", events[0]);
    };
    assert_eq!(
        (c.id, c.body.as_str(), c.author.login.as_str(), issue.number),
        (comment.id, "On it.", bot, 1)
    );
    let Event::IssueComment {
        action: CommentAction::Edited,
        comment: c,
        ..
    } = &events[1]
    else {
        panic!("not an edit: {:?}", events[1]);
    };
    assert_eq!((c.id, c.body.as_str()), (comment.id, "On it: working."));
    assert_eq!(ds[1].json()["changes"]["body"]["from"], "On it.");

    let Event::PullRequest {
        action: PullRequestAction::Opened,
        pull_request: p,
        ..
    } = &events[2]
    else {
        panic!("not an opened pull request: {:?}", events[2]);
    };
    assert_eq!(
        (
            p.number,
            p.title.as_str(),
            p.head_ref.as_str(),
            p.base_ref.as_str()
        ),
        (pr.number, "Fix add", "forgehand/issue-1", "main")
    );
    assert_eq!(p.author.login, bot);
    let Event::PullRequest {
        action: PullRequestAction::Edited,
        pull_request: p,
        ..
    } = &events[3]
    else {
        panic!("not an edited pull request: {:?}", events[3]);
    };
    assert_eq!((p.number, p.title.as_str()), (pr.number, "Fix add()"));
    assert_eq!(
        ds[3].json()["changes"],
        json!({"title": {"from": "Fix add"}})
    );
    let Event::PullRequest {
        action: PullRequestAction::ReviewRequested,
        ..
    } = &events[4]
    else {
        panic!("not a review request: {:?}", events[4]);
    };
    assert_eq!(ds[4].json()["requested_reviewer"]["login"], "maintainer");
    let requested = &ds[4].json()["pull_request"]["requested_reviewers"];
    assert_eq!(requested[0]["login"], "maintainer", "{requested}");

    // GitHub answers in the thread; Gitea has no replies, a review joins it.
    match (kind, &events[6]) {
        (
            Kind::GitHub,
            Event::ReviewComment {
                action: CommentAction::Created,
                pull_request,
                comment,
                path,
                line,
                in_reply_to,
                ..
            },
        ) => {
            assert_eq!(
                (pull_request.number, comment.body.as_str()),
                (2, "Because.")
            );
            assert_eq!(
                (path.as_deref(), *line, *in_reply_to),
                (Some("calc.sh"), Some(2), Some(thread.id))
            );
        }
        (
            Kind::Gitea,
            Event::ReviewSubmitted {
                pull_request,
                state: ReviewState::Commented,
                ..
            },
        ) => {
            assert_eq!(pull_request.number, 2);
        }
        (_, other) => panic!("not a reply: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_announces_the_bots_own_api_calls() {
    the_bots_api_calls(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gitea_announces_the_bots_own_api_calls() {
    the_bots_api_calls(Kind::Gitea).await;
}
