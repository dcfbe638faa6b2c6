//! The Gitea client against the fake Gitea, which checks every request
//! against Gitea's own API description: each operation the pipeline uses,
//! and the error kinds.

use std::time::Duration;

use forgehand_forge::api::gitea::GiteaClient;
use forgehand_forge::api::{
    CommitStatus, ForgeApi, ForgeError, IssueState, NewPullRequest, Permission, ReactionTarget,
    RepoRef, ReviewState, StatusState,
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
        // What `forgehand setup gitea` asks a token to carry.
        s.token_scopes.insert(
            BOT_TOKEN.into(),
            forgehand_tests::story::GITEA_SCOPES
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        );
    });
    gitea.api_test_repository("forgehand");
    let client = GiteaClient::new(&gitea.base_url, SecretString::from(BOT_TOKEN)).unwrap();
    (gitea, client, RepoRef::new("acme", "demo"))
}

#[tokio::test]
async fn reads_an_issue_its_comments_and_who_may_command() {
    let (gitea, client, repo) = setup().await;
    let issue = client.issue(&repo, 1).await.unwrap();
    assert_eq!(
        (
            issue.title.as_str(),
            issue.author.login.as_str(),
            issue.state == IssueState::Open
        ),
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
        draft: false,
    };
    let first = client.open_pull_request(&repo, &new).await.unwrap();
    assert_eq!(
        (first.number, first.head_ref.as_str()),
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
            &gitea.with(|s| {
                let git = git2::Repository::open_bare(&s.git_dirs["acme/demo"]).unwrap();
                let main = git.find_reference("refs/heads/main").unwrap();
                let id = main.peel_to_commit().unwrap().id();
                forgehand_types::CommitSha::parse(&id.to_string()).unwrap()
            }),
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
                draft: false,
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
    assert_eq!(reviews[0].state, Some(ReviewState::ChangesRequested));
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
        Err(ForgeError::RateLimited { retry_after, .. }) => {
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
                draft: false,
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
        .map(|t| (t.author.login.as_str(), t.path.as_str(), t.review_id))
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
    assert_eq!(theirs[0].author.login, "drive-by");
    assert_eq!(forge.violations(), Vec::<String>::new());
}

fn count(gitea: &FakeForge, call: &str) -> usize {
    gitea.with(|s| s.calls.iter().filter(|c| *c == call).count())
}

const HEAD: &str = "forgehand/1-fix-the-readme";

fn new_pull() -> NewPullRequest<'static> {
    NewPullRequest {
        title: "Fix the README",
        body: "Closes #1",
        head: HEAD,
        base: "main",
        draft: false,
    }
}

/// Gitea answers 50 items a page at most, newest first, with the whole
/// list's length in `X-Total-Count`: the bot's pull request behind 60
/// newer ones is found (by its base and head), and the paged lists are
/// read to their end.
#[tokio::test]
async fn the_bots_pull_request_is_found_behind_sixty_newer_ones() {
    let (gitea, client, repo) = setup().await;
    let first = client.open_pull_request(&repo, &new_pull()).await.unwrap();
    gitea.with(|s| {
        for n in 1..=60 {
            s.add_pull(
                "acme/demo",
                "drive-by",
                "Change",
                &format!("change-{n}"),
                "main",
            );
        }
        for n in 1..=60 {
            s.add_review(
                "acme/demo",
                first.number,
                "reader",
                "COMMENT",
                &format!("review {n}"),
                &[],
            );
        }
        for n in 2..=150 {
            s.add_comment("acme/demo", 1, "reader", &format!("comment {n}"));
        }
    });
    let again = client.open_pull_request(&repo, &new_pull()).await.unwrap();
    assert_eq!(again.number, first.number);
    assert_eq!(count(&gitea, "POST /repos/{owner}/{repo}/pulls"), 1);
    assert_eq!(
        count(&gitea, "GET /repos/{owner}/{repo}/pulls/{base}/{head}"),
        2
    );
    let reviews = client.reviews(&repo, first.number).await.unwrap();
    assert_eq!(reviews.len(), 60);
    assert_eq!(reviews[59].body, "review 60");
    assert_eq!(
        count(&gitea, "GET /repos/{owner}/{repo}/pulls/{index}/reviews"),
        2
    );
    let comments = client.comments(&repo, 1).await.unwrap();
    assert_eq!(
        comments.len(),
        150,
        "Gitea answers an issue's comments whole"
    );
    assert_eq!(gitea.violations(), Vec::<String>::new());
}

/// Gitea's base/head lookup answers the first pull request of that base
/// and head whatever its state: when it is closed, the open one after
/// it is found among the open pull requests, and updated.
#[tokio::test]
async fn a_closed_pull_request_of_the_same_branch_is_passed_over_for_the_open_one() {
    let (gitea, client, repo) = setup().await;
    let open = gitea.with(|s| {
        let closed = s.add_pull("acme/demo", "forgehand", "Old try", HEAD, "main");
        s.issues
            .iter_mut()
            .find(|i| i.number == closed)
            .unwrap()
            .open = false;
        for n in 1..=55 {
            s.add_pull(
                "acme/demo",
                "drive-by",
                "Change",
                &format!("change-{n}"),
                "main",
            );
        }
        let open = s.add_pull("acme/demo", "forgehand", "Second try", HEAD, "main");
        for n in 56..=110 {
            s.add_pull(
                "acme/demo",
                "drive-by",
                "Change",
                &format!("change-{n}"),
                "main",
            );
        }
        open
    });
    let updated = client.open_pull_request(&repo, &new_pull()).await.unwrap();
    assert_eq!(updated.number, open);
    assert_eq!(updated.title, "Fix the README");
    assert_eq!(count(&gitea, "POST /repos/{owner}/{repo}/pulls"), 0);
    assert_eq!(gitea.violations(), Vec::<String>::new());
}

/// A fork's pull request from a branch named like the bot's is not the
/// bot's: the bot opens its own and leaves the fork's as it is.
#[tokio::test]
async fn a_forks_pull_request_from_a_branch_named_like_the_bots_is_left_alone() {
    let (gitea, client, repo) = setup().await;
    let fork =
        gitea.with(|s| s.add_fork_pull("acme/demo", "mallory/demo", "mallory", HEAD, "main"));
    let opened = client.open_pull_request(&repo, &new_pull()).await.unwrap();
    assert_ne!(opened.number, fork);
    gitea.with(|s| {
        let theirs = s.issues.iter().find(|i| i.number == fork).unwrap();
        assert_eq!(
            theirs.title, "From a fork",
            "the fork's pull request is untouched"
        );
    });
    assert_eq!(
        count(&gitea, "PATCH /repos/{owner}/{repo}/pulls/{index}"),
        0
    );
    assert_eq!(gitea.violations(), Vec::<String>::new());
}
