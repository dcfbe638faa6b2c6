//! The Gitea client against the fake Gitea, which checks every request
//! against Gitea's own API description: each operation the pipeline uses,
//! and the error kinds.

use std::time::Duration;

use forgehand_forge::api::gitea::GiteaClient;
use forgehand_forge::api::{
    CommitStatus, ForgeApi, ForgeError, NewPullRequest, Permission, ReactionTarget, RepoRef,
    ReviewState, StatusState,
};
use forgehand_tests::fake_forge::{FakeForge, Kind};
use secrecy::SecretString;

const BOT_TOKEN: &str = "gitea-bot-token-0123456789";

async fn setup() -> (FakeForge, GiteaClient, RepoRef) {
    let gitea = FakeForge::start(Kind::Gitea).await.unwrap();
    gitea.with(|s| {
        s.tokens.insert(BOT_TOKEN.into(), "forgehand".into());
        for (user, permission) in [
            ("maintainer", "write"),
            ("owner", "owner"),
            ("reader", "read"),
        ] {
            s.permissions
                .insert(("acme/demo".into(), user.into()), permission.into());
        }
        s.add_issue(
            "acme/demo",
            "maintainer",
            "Fix the README",
            "The install line is wrong.",
        );
        s.add_comment("acme/demo", 1, "maintainer", "@forgehand fix this please");
    });
    let client = GiteaClient::new(&gitea.base_url, SecretString::from(BOT_TOKEN)).unwrap();
    (gitea, client, RepoRef::new("acme", "demo"))
}

#[tokio::test]
async fn reads_an_issue_its_comments_and_who_may_command() {
    let (gitea, client, repo) = setup().await;
    let issue = client.issue(&repo, 1).await.unwrap();
    assert_eq!(
        (issue.title.as_str(), issue.author.as_str(), issue.open),
        ("Fix the README", "maintainer", true)
    );
    let comments = client.comments(&repo, 1).await.unwrap();
    assert_eq!(comments.len(), 1);
    assert_eq!(comments[0].body, "@forgehand fix this please");
    assert_eq!(
        client.permission(&repo, "maintainer").await.unwrap(),
        Permission::Write
    );
    assert_eq!(
        client.permission(&repo, "owner").await.unwrap(),
        Permission::Admin
    );
    assert!(!client
        .permission(&repo, "reader")
        .await
        .unwrap()
        .can_write());
    assert_eq!(
        client.permission(&repo, "stranger").await.unwrap(),
        Permission::None
    );
    assert_eq!(gitea.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn reacts_and_keeps_one_status_comment() {
    let (gitea, client, repo) = setup().await;
    client
        .react_eyes(&repo, ReactionTarget::Issue(1))
        .await
        .unwrap();
    let comment_id = gitea.with(|s| s.comments[0].id);
    client
        .react_eyes(&repo, ReactionTarget::Comment(comment_id))
        .await
        .unwrap();
    let status = client
        .create_comment(&repo, 1, "- [ ] preparing")
        .await
        .unwrap();
    client
        .edit_comment(&repo, status.id, "- [x] preparing\n- [ ] working")
        .await
        .unwrap();
    gitea.with(|s| {
        let eyes: Vec<&str> = s.reactions.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(
            eyes,
            ["issue:1".to_owned(), format!("comment:{comment_id}")]
        );
        assert!(s
            .reactions
            .iter()
            .all(|r| r.2 == "forgehand" && r.3 == "eyes"));
        let mine: Vec<&str> = s
            .comments
            .iter()
            .filter(|c| c.user == "forgehand")
            .map(|c| c.body.as_str())
            .collect();
        assert_eq!(mine, ["- [x] preparing\n- [ ] working"]);
    });
    assert_eq!(gitea.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn opens_a_pull_request_once_and_updates_it_after() {
    let (gitea, client, repo) = setup().await;
    let new = NewPullRequest {
        title: "Fix the README",
        body: "Closes #1",
        head: "forgehand/1-fix-the-readme",
        base: "main",
    };
    let first = client.open_pull_request(&repo, &new).await.unwrap();
    assert_eq!(
        (first.number, first.head.as_str()),
        (2, "forgehand/1-fix-the-readme")
    );
    let again = client
        .open_pull_request(
            &repo,
            &NewPullRequest {
                body: "Closes #1\n\nUpdated.",
                ..new.clone()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        again.number, first.number,
        "the open one is updated, not duplicated"
    );
    client
        .request_review(&repo, first.number, &["maintainer"])
        .await
        .unwrap();
    client
        .set_status(
            &repo,
            "0123456789abcdef0123456789abcdef01234567",
            &CommitStatus {
                state: StatusState::Success,
                context: "forgehand",
                description: "done in 3 turns",
                target_url: None,
            },
        )
        .await
        .unwrap();
    gitea.with(|s| {
        assert_eq!(s.issues.iter().filter(|i| i.pull.is_some()).count(), 1);
        assert_eq!(s.issues[1].body, "Closes #1\n\nUpdated.");
        assert_eq!(
            s.review_requests,
            [("acme/demo".to_owned(), 2, "maintainer".to_owned())]
        );
        assert_eq!(s.statuses[0].2, "success");
    });
    assert_eq!(gitea.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn reads_reviews_and_answers_in_their_threads() {
    let (gitea, client, repo) = setup().await;
    let pr = client
        .open_pull_request(
            &repo,
            &NewPullRequest {
                title: "t",
                body: "b",
                head: "forgehand/1-x",
                base: "main",
            },
        )
        .await
        .unwrap();
    gitea.with(|s| {
        s.add_review(
            "acme/demo",
            pr.number,
            "maintainer",
            "REQUEST_CHANGES",
            "Almost.",
            &[("README.md", 3, "Use `cargo install`.")],
        );
    });
    let reviews = client.reviews(&repo, pr.number).await.unwrap();
    assert_eq!(reviews.len(), 1);
    assert_eq!(reviews[0].state, ReviewState::ChangesRequested);
    let threads = client.review_comments(&repo, pr.number).await.unwrap();
    assert_eq!(threads.len(), 1);
    assert_eq!(
        (threads[0].path.as_str(), threads[0].line),
        ("README.md", Some(3))
    );
    client
        .reply_to_review_comment(&repo, pr.number, &threads[0], "Done in 0a1b2c3.")
        .await
        .unwrap();
    gitea.with(|s| {
        let reply = s.review_comments.last().unwrap();
        assert_eq!(
            (
                reply.user.as_str(),
                reply.path.as_str(),
                reply.position,
                reply.body.as_str()
            ),
            ("forgehand", "README.md", 3, "Done in 0a1b2c3.")
        );
    });
    assert_eq!(gitea.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn errors_come_with_their_kind() {
    let (gitea, client, repo) = setup().await;
    assert!(matches!(
        client.issue(&repo, 99).await,
        Err(ForgeError::NotFound(_))
    ));
    gitea.with(|s| s.faults.push_back((429, Some(7))));
    match client.issue(&repo, 1).await {
        Err(ForgeError::RateLimited { retry_after }) => {
            assert_eq!(retry_after, Duration::from_secs(7))
        }
        other => panic!("{other:?}"),
    }
    gitea.with(|s| s.faults.push_back((409, None)));
    assert!(matches!(
        client.create_comment(&repo, 1, "x").await,
        Err(ForgeError::Conflict(_))
    ));
    let stranger = GiteaClient::new(&gitea.base_url, SecretString::from("wrong-token")).unwrap();
    let error = stranger.issue(&repo, 1).await.unwrap_err();
    assert!(matches!(error, ForgeError::Forbidden(_)), "{error:?}");
    assert!(!error.to_string().contains("wrong-token"));
    assert_eq!(gitea.violations(), Vec::<String>::new());
}

/// A follow-up answers the threads of the review that triggered it, not
/// every review comment on the pull request: one review's comments are
/// read by that review.
#[tokio::test]
async fn the_threads_of_one_review_are_that_reviews_comments_alone() {
    let (forge, client, repo) = setup().await;
    let pr = client
        .open_pull_request(
            &repo,
            &NewPullRequest {
                title: "t",
                body: "b",
                head: "forgehand/1-x",
                base: "main",
            },
        )
        .await
        .unwrap();
    let (outsiders, maintainers) = forge.with(|s| {
        let outsiders = s.add_review(
            "acme/demo",
            pr.number,
            "drive-by",
            "COMMENT",
            "",
            &[("README.md", 1, "Delete the tests.")],
        );
        let maintainers = s.add_review(
            "acme/demo",
            pr.number,
            "maintainer",
            "REQUEST_CHANGES",
            "Almost.",
            &[
                ("README.md", 3, "Use cargo install."),
                ("src/lib.rs", 2, "Name it."),
            ],
        );
        (outsiders, maintainers)
    });
    let threads = client
        .review_threads(&repo, pr.number, maintainers)
        .await
        .unwrap();
    let seen: Vec<(&str, &str, Option<u64>)> = threads
        .iter()
        .map(|t| (t.author.as_str(), t.path.as_str(), t.review_id))
        .collect();
    assert_eq!(
        seen,
        [
            ("maintainer", "README.md", Some(maintainers)),
            ("maintainer", "src/lib.rs", Some(maintainers))
        ]
    );
    let theirs = client
        .review_threads(&repo, pr.number, outsiders)
        .await
        .unwrap();
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0].author, "drive-by");
    assert_eq!(forge.violations(), Vec::<String>::new());
}
