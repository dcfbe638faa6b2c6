//! The GitHub client (octocrab) against the fake GitHub, which checks every
//! request against GitHub's own REST description: with a personal token,
//! and as a GitHub App whose installation token is fetched once however
//! many jobs ask at the same moment (what both clients must do is in
//! forge_clients.rs, run on both).

use forgehand_forge::api::github::{GitHubAuth, GitHubClient};
use forgehand_forge::api::{
    CommitStatus, ForgeApi, ForgeError, NewPullRequest, Permission, ReactionTarget, ReviewState,
    StatusState,
};
use forgehand_tests::fake_forge::{FakeForge, Kind};
use forgehand_tests::forge_clients::{count, forge_with_an_issue, repo, GITHUB_TOKEN as TOKEN};
use forgehand_tests::github_app::key_pair;
use secrecy::SecretString;

async fn fake() -> FakeForge {
    forge_with_an_issue(Kind::GitHub).await
}

/// The commit of `main` in the fake's repository.
fn main_commit(forge: &FakeForge) -> forgehand_types::CommitSha {
    forge.with(|s| {
        let dir = s.git_dirs["acme/demo"].clone();
        let git = git2::Repository::open_bare(dir).unwrap();
        let main = git.find_reference("refs/heads/main").unwrap();
        let id = main.peel_to_commit().unwrap().id();
        forgehand_types::CommitSha::parse(&id.to_string()).unwrap()
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn every_operation_with_a_personal_token() {
    let github = fake().await;
    let client = GitHubClient::new(
        &github.base_url,
        GitHubAuth::Token(SecretString::from(TOKEN)),
    )
    .unwrap();
    let repo = repo();
    let issue = client.issue(&repo, 1).await.unwrap();
    assert_eq!(
        (issue.title.as_str(), issue.author.login.as_str()),
        ("Fix the README", "maintainer")
    );
    assert_eq!(
        client.comments(&repo, 1).await.unwrap()[0].body,
        "@forgehand fix this please"
    );
    assert_eq!(
        client.permission(&repo, "maintainer").await.unwrap(),
        Permission::Write
    );
    assert_eq!(
        client.permission(&repo, "owner").await.unwrap(),
        Permission::Admin
    );
    assert_eq!(
        client.permission(&repo, "stranger").await.unwrap(),
        Permission::None
    );
    client
        .react_eyes(&repo, ReactionTarget::Issue(1))
        .await
        .unwrap();
    let status = client
        .create_comment(&repo, 1, "- [ ] working")
        .await
        .unwrap();
    client
        .edit_comment(&repo, status.id, "- [x] working")
        .await
        .unwrap();

    let new = NewPullRequest {
        title: "Fix the README",
        body: "Closes #1",
        head: "forgehand/1-fix",
        base: "main",
        draft: false,
    };
    let pr = client.open_pull_request(&repo, &new).await.unwrap();
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
        again.number, pr.number,
        "the open pull request is updated, not duplicated"
    );
    client
        .request_review(&repo, pr.number, &["maintainer"])
        .await
        .unwrap();

    github.with(|s| {
        s.add_review(
            "acme/demo",
            pr.number,
            "maintainer",
            "CHANGES_REQUESTED",
            "Almost.",
            &[("README.md", 3, "Use cargo install.")],
        );
    });
    let reviews = client.reviews(&repo, pr.number).await.unwrap();
    assert_eq!(reviews[0].state, Some(ReviewState::ChangesRequested));
    let threads = client.review_comments(&repo, pr.number).await.unwrap();
    assert_eq!(
        (threads[0].path.as_str(), threads[0].line),
        ("README.md", Some(3))
    );
    client
        .reply_to_review_comment(&repo, pr.number, &threads[0], "Done in 0a1b2c3.")
        .await
        .unwrap();
    client
        .set_status(
            &repo,
            &main_commit(&github),
            &CommitStatus {
                state: StatusState::Pending,
                context: "forgehand",
                description: "working",
                target_url: None,
            },
        )
        .await
        .unwrap();

    github.with(|s| {
        assert_eq!(s.reactions[0].3, "eyes");
        assert_eq!(
            s.comments.iter().filter(|c| c.user == "forgehand").count(),
            1
        );
        assert_eq!(s.issues.iter().filter(|i| i.pull.is_some()).count(), 1);
        assert_eq!(s.issues[1].body, "Closes #1\n\nUpdated.");
        let reply = s.review_comments.last().unwrap();
        assert_eq!(
            (reply.in_reply_to, reply.body.as_str()),
            (Some(threads[0].id), "Done in 0a1b2c3.")
        );
        assert_eq!(s.statuses[0].2, "pending");
    });
    assert_eq!(github.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn as_an_app_one_installation_token_serves_jobs_that_ask_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(dir.path(), "app");
    let github = fake().await;
    github.with(|s| {
        s.apps.push((4242, public));
        s.installations.insert("acme/demo".into(), 77);
        s.permissions.insert(
            ("acme/demo".into(), "forgehand[bot]".into()),
            "write".into(),
        );
    });
    let app = || GitHubAuth::App {
        app_id: 4242,
        private_key: SecretString::from(private.clone()),
    };
    let client = std::sync::Arc::new(GitHubClient::new(&github.base_url, app()).unwrap());
    let repo = repo();
    let jobs: Vec<_> = (0..8)
        .map(|_| {
            let (client, repo) = (client.clone(), repo.clone());
            tokio::spawn(async move { client.issue(&repo, 1).await })
        })
        .collect();
    for job in jobs {
        assert_eq!(job.await.unwrap().unwrap().number, 1);
    }
    client.create_comment(&repo, 1, "on it").await.unwrap();
    // As an App, a status is a check run.
    let sha = &main_commit(&github);
    for (state, description) in [
        (StatusState::Pending, "working"),
        (StatusState::Success, "integrity and secret checks passed"),
    ] {
        let status = CommitStatus {
            state,
            context: "forgehand",
            description,
            target_url: None,
        };
        client.set_status(&repo, sha, &status).await.unwrap();
    }
    github.with(|s| {
        assert_eq!(s.issued_tokens, [77], "one token for eight jobs at once");
        assert_eq!(s.comments.last().unwrap().user, "forgehand[bot]");
        assert!(
            s.calls
                .iter()
                .any(|c| c == "POST /repos/{owner}/{repo}/check-runs"),
            "{:?}",
            s.calls
        );
        let runs: Vec<(&str, &str)> = s
            .statuses
            .iter()
            .map(|st| (st.2.as_str(), st.4.as_str()))
            .collect();
        assert_eq!(
            runs,
            [
                ("in_progress", "working"),
                ("success", "integrity and secret checks passed")
            ]
        );
    });

    // A token close to expiry is renewed before use.
    github.with(|s| s.token_ttl_secs = Some(60));
    let short = GitHubClient::new(&github.base_url, app()).unwrap();
    short.issue(&repo, 1).await.unwrap();
    short.issue(&repo, 1).await.unwrap();
    github.with(|s| {
        assert_eq!(
            s.issued_tokens.len(),
            3,
            "a token with a minute left is not used"
        )
    });

    // A JWT signed with another key is refused.
    let (other_private, _) = key_pair(dir.path(), "other");
    let impostor = GitHubClient::new(
        &github.base_url,
        GitHubAuth::App {
            app_id: 4242,
            private_key: SecretString::from(other_private),
        },
    )
    .unwrap();
    let error = impostor.issue(&repo, 1).await.unwrap_err();
    assert!(matches!(error, ForgeError::Forbidden(_)), "{error:?}");
    assert_eq!(github.violations(), Vec::<String>::new());
}

fn token_client(forge: &FakeForge) -> GitHubClient {
    GitHubClient::new(
        &forge.base_url,
        GitHubAuth::Token(SecretString::from(TOKEN)),
    )
    .unwrap()
}

/// GitHub answers 100 items a page at most and names the next page in
/// `Link`: every list is read to its end.
#[tokio::test(flavor = "multi_thread")]
async fn lists_are_read_to_the_end_a_hundred_at_a_time() {
    let forge = fake().await;
    let pr = forge.with(|s| {
        for n in 2..=250 {
            s.add_comment("acme/demo", 1, "reader", &format!("comment {n}"));
        }
        let pr = s.add_pull("acme/demo", "forgehand", "Fix", "forgehand/1-fix", "main");
        for n in 1..=120 {
            s.add_review(
                "acme/demo",
                pr,
                "reader",
                "COMMENTED",
                &format!("review {n}"),
                &[("a.rs", 1, "a thread")],
            );
        }
        pr
    });
    let client = token_client(&forge);
    let comments = client.comments(&repo(), 1).await.unwrap();
    assert_eq!(comments.len(), 250);
    assert_eq!(comments[249].body, "comment 250");
    let mut ids: Vec<u64> = comments.iter().map(|c| c.id).collect();
    ids.dedup();
    assert_eq!(ids.len(), 250, "no comment twice");
    assert_eq!(
        count(
            &forge,
            "GET /repos/{owner}/{repo}/issues/{issue_number}/comments"
        ),
        3
    );
    let reviews = client.reviews(&repo(), pr).await.unwrap();
    assert_eq!(reviews.len(), 120);
    assert_eq!(reviews[119].body, "review 120");
    let threads = client.review_comments(&repo(), pr).await.unwrap();
    assert_eq!(threads.len(), 120);
    assert_eq!(
        count(
            &forge,
            "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews"
        ),
        2
    );
    assert_eq!(forge.violations(), Vec::<String>::new());
}

/// No list is read past 50 pages: 5,050 comments are read as 5,000.
#[tokio::test(flavor = "multi_thread")]
async fn a_list_is_read_to_the_page_bound_and_no_further() {
    let forge = fake().await;
    forge.with(|s| {
        for n in 2..=5050 {
            s.add_comment("acme/demo", 1, "reader", &format!("comment {n}"));
        }
    });
    let comments = token_client(&forge).comments(&repo(), 1).await.unwrap();
    assert_eq!(comments.len(), 100 * forgehand_forge::api::MAX_PAGES);
    assert_eq!(
        count(
            &forge,
            "GET /repos/{owner}/{repo}/issues/{issue_number}/comments"
        ),
        forgehand_forge::api::MAX_PAGES
    );
}

/// A comment whose answer was lost is found by the retry, not made again
/// (the retrying client over the real one, against the fake GitHub).
#[tokio::test(flavor = "multi_thread")]
async fn a_comment_whose_answer_was_lost_is_made_once() {
    use forgehand_forge::api::{RetryPolicy, Retrying};
    use forgehand_tests::fake_forge::CallFault;
    let github = fake().await;
    let client = GitHubClient::new(
        &github.base_url,
        GitHubAuth::Token(SecretString::from(TOKEN)),
    )
    .unwrap();
    let api = Retrying::new(std::sync::Arc::new(client), RetryPolicy::default());
    github.with(|s| {
        s.call_faults.push(CallFault {
            call: "POST /repos/{owner}/{repo}/issues/{issue_number}/comments".into(),
            status: 502,
            retry_after: None,
            after_serving: true,
        })
    });
    let made = api
        .create_comment(
            &repo(),
            1,
            "🛠\u{fe0f} **working**\n\n<!-- forgehand:job:5 -->",
        )
        .await
        .unwrap();
    let bots: Vec<u64> = github.with(|s| {
        s.comments
            .iter()
            .filter(|c| c.user == "forgehand")
            .map(|c| c.id)
            .collect()
    });
    assert_eq!(bots, [made.id], "made once");
}
