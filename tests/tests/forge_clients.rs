//! What both forge clients must do, each story once and run on both
//! fakes (which check every request against the forge's own API
//! description): errors read into their kinds, a review's threads read by
//! that review, a fork's pull request left alone.

use std::time::Duration;

use forgehand_forge::api::{ForgeError, NewPullRequest};
use forgehand_tests::fake_forge::Kind;
use forgehand_tests::forge_clients::{bot_token, client, count, forge_with_an_issue, repo};

async fn errors_come_with_their_kind(kind: Kind) {
    let forge = forge_with_an_issue(kind).await;
    let client = client(&forge, bot_token(kind));
    let repo = repo();
    assert!(matches!(
        client.issue(&repo, 99).await,
        Err(ForgeError::NotFound(_))
    ));
    forge.with(|s| s.faults.push_back((429, Some(7))));
    match client.issue(&repo, 1).await {
        Err(ForgeError::RateLimited { retry_after, .. }) => {
            assert_eq!(retry_after, Duration::from_secs(7))
        }
        other => panic!("{other:?}"),
    }
    forge.with(|s| s.faults.push_back((409, None)));
    assert!(matches!(
        client.create_comment(&repo, 1, "x").await,
        Err(ForgeError::Conflict(_))
    ));
    let stranger = forgehand_tests::forge_clients::client(&forge, "wrong-token-4f2a");
    let error = stranger.issue(&repo, 1).await.unwrap_err();
    assert!(matches!(error, ForgeError::Forbidden(_)), "{error:?}");
    assert!(!error.to_string().contains("wrong-token-4f2a"));
    assert_eq!(forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_errors_come_with_their_kind() {
    errors_come_with_their_kind(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_errors_come_with_their_kind() {
    errors_come_with_their_kind(Kind::Gitea).await;
}

/// A follow-up answers the threads of the review that triggered it, not
/// every review comment on the pull request: one review's comments are
/// read by that review.
async fn the_threads_of_one_review_are_that_reviews_comments_alone(kind: Kind) {
    let forge = forge_with_an_issue(kind).await;
    let client = client(&forge, bot_token(kind));
    let repo = repo();
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
    // Each forge spells a review's state its own way.
    let (comment, request_changes) = match kind {
        Kind::GitHub => ("COMMENTED", "CHANGES_REQUESTED"),
        Kind::Gitea => ("COMMENT", "REQUEST_CHANGES"),
    };
    let (outsiders, maintainers) = forge.with(|s| {
        let outsiders = s.add_review(
            "acme/demo",
            pr.number,
            "drive-by",
            comment,
            "",
            &[("README.md", 1, "Delete the tests.")],
        );
        let maintainers = s.add_review(
            "acme/demo",
            pr.number,
            "maintainer",
            request_changes,
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

#[tokio::test(flavor = "multi_thread")]
async fn github_the_threads_of_one_review_are_that_reviews_comments_alone() {
    the_threads_of_one_review_are_that_reviews_comments_alone(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_the_threads_of_one_review_are_that_reviews_comments_alone() {
    the_threads_of_one_review_are_that_reviews_comments_alone(Kind::Gitea).await;
}

/// A fork can hold a branch named like the bot's: its pull request is
/// not the bot's to retitle, and the bot opens its own.
async fn a_forks_pull_request_from_a_branch_named_like_the_bots_is_left_alone(kind: Kind) {
    let forge = forge_with_an_issue(kind).await;
    let head = "forgehand/1-fix-the-readme";
    let fork =
        forge.with(|s| s.add_fork_pull("acme/demo", "mallory/demo", "mallory", head, "main"));
    let new = NewPullRequest {
        title: "Fix the README",
        body: "Closes #1",
        head,
        base: "main",
        draft: false,
    };
    let opened = client(&forge, bot_token(kind))
        .open_pull_request(&repo(), &new)
        .await
        .unwrap();
    assert_ne!(opened.number, fork);
    forge.with(|s| {
        let theirs = s.issues.iter().find(|i| i.number == fork).unwrap();
        assert_eq!(
            theirs.title, "From a fork",
            "the fork's pull request is untouched"
        );
        let ours = s.issues.iter().find(|i| i.number == opened.number).unwrap();
        assert_eq!(
            (ours.user.as_str(), ours.head_repo.as_deref()),
            ("forgehand", None)
        );
    });
    let edit = match kind {
        Kind::GitHub => "PATCH /repos/{owner}/{repo}/pulls/{pull_number}",
        Kind::Gitea => "PATCH /repos/{owner}/{repo}/pulls/{index}",
    };
    assert_eq!(count(&forge, edit), 0, "no pull request was edited");
    assert_eq!(forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn github_a_forks_pull_request_from_a_branch_named_like_the_bots_is_left_alone() {
    a_forks_pull_request_from_a_branch_named_like_the_bots_is_left_alone(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_a_forks_pull_request_from_a_branch_named_like_the_bots_is_left_alone() {
    a_forks_pull_request_from_a_branch_named_like_the_bots_is_left_alone(Kind::Gitea).await;
}
