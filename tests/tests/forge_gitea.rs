//! The Gitea client against the fake Gitea, which checks every request
//! against Gitea's own API description: each operation the pipeline uses
//! (what both clients must do is in forge_clients.rs, run on both).

use forgehand_forge::api::{
    CommitStatus, ForgeApi, IssueState, NewPullRequest, Permission, ReactionTarget, RepoRef,
    ReviewState, StatusState,
};
use forgehand_tests::fake_forge::{FakeForge, Kind};
use forgehand_tests::forge_clients::{self, bot_token, count, forge_with_an_issue, repo};

async fn setup() -> (FakeForge, Box<dyn ForgeApi>, RepoRef) {
    let gitea = forge_with_an_issue(Kind::Gitea).await;
    let client = forge_clients::client(&gitea, bot_token(Kind::Gitea));
    (gitea, client, repo())
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
