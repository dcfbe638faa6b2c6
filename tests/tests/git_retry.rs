//! Git's network calls under faults, against the real `git http-backend`
//! failing requests on demand: the mirror's fetch and the push of the
//! bot's branch meet a 5xx or a rate limit and go through within the call
//! (and fail without the retry); a push whose answer was lost is
//! recognised as landed; refused credentials, a refused push and a missing
//! repository fail at once; a server that always fails is given up on with
//! an error naming the call and the remote, never the token.

use std::path::Path;
use std::time::Duration;

use forgehand_forge::api::RetryPolicy;
use forgehand_forge::git::transport::{self, Credentials, TransportError};
use forgehand_forge::git::{push_branch_with, MirrorCache, PushError, PushRequest};
use forgehand_tests::git_http::{GitFault, GitHttpServer, GitRequest};
use secrecy::SecretString;

const TOKEN: &str = "ghs_retry-test-token-not-real-0123456789";

/// The default policy's tries with quick waits, so the tests do not wait
/// out the real backoff.
fn quick() -> RetryPolicy {
    RetryPolicy {
        attempts: RetryPolicy::default().attempts,
        first_backoff: Duration::from_millis(20),
        longest_wait: Duration::from_secs(2),
    }
}

/// One try: the calls as they were before they were retried.
fn once() -> RetryPolicy {
    RetryPolicy {
        attempts: 1,
        ..quick()
    }
}

fn token(value: &str) -> Credentials {
    Credentials::Token {
        username: "bot".into(),
        token: SecretString::from(value.to_owned()),
    }
}

/// `demo.git` with one commit on `main`, served to `bot` with [`TOKEN`].
struct Served {
    root: tempfile::TempDir,
    server: GitHttpServer,
    url: String,
}

async fn served() -> Served {
    let root = tempfile::tempdir().unwrap();
    git2::Repository::init_opts(
        root.path().join("demo.git"),
        git2::RepositoryInitOptions::new()
            .bare(true)
            .initial_head("main"),
    )
    .unwrap();
    let server = GitHttpServer::start(root.path(), "bot", TOKEN)
        .await
        .unwrap();
    let url = format!("{}/demo.git", server.base_url);
    let seed = root.path().join("seed");
    let to = url.clone();
    tokio::task::spawn_blocking(move || {
        let (repo, _) = commit_on(&seed, "main", "a.txt", None);
        transport::push(
            &repo,
            &to,
            &["refs/heads/main:refs/heads/main"],
            &token(TOKEN),
        )
        .unwrap();
    })
    .await
    .unwrap();
    server.forget_seen();
    Served { root, server, url }
}

/// A commit on `branch` in the repository at `dir` (made if need be),
/// on top of `parent`.
fn commit_on(
    dir: &Path,
    branch: &str,
    file: &str,
    parent: Option<git2::Oid>,
) -> (git2::Repository, git2::Oid) {
    let repo = git2::Repository::open(dir).unwrap_or_else(|_| git2::Repository::init(dir).unwrap());
    std::fs::write(dir.join(file), format!("{file}\n")).unwrap();
    let oid = {
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(file)).unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("forgehand", "forgehand@example.invalid").unwrap();
        let parents: Vec<git2::Commit<'_>> = parent
            .iter()
            .map(|p| repo.find_commit(*p).unwrap())
            .collect();
        let parents: Vec<&git2::Commit<'_>> = parents.iter().collect();
        repo.commit(
            Some(&format!("refs/heads/{branch}")),
            &sig,
            &sig,
            file,
            &tree,
            &parents,
        )
        .unwrap()
    };
    (repo, oid)
}

fn assert_names_the_call(error: &str, call: &str, url: &str) {
    assert!(
        error.starts_with(&format!("{call} {url}: ")),
        "names the call and the remote: {error}"
    );
    assert!(!error.contains(TOKEN), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fetch_meeting_server_errors_goes_through_within_the_call_and_fails_without_the_retry() {
    let served = served().await;
    let (url, cache_dir) = (served.url.clone(), served.root.path().join("cache"));
    let server = &served.server;
    // The first clone: a 502 on info/refs, then a 503 on the pack.
    server.faults(|f| {
        f.next.push(GitFault::new(GitRequest::FetchRefs, 502));
        f.next.push(GitFault::new(GitRequest::FetchPack, 503));
    });
    let (u, dir) = (url.clone(), cache_dir.clone());
    let main = tokio::task::spawn_blocking(move || {
        let mirror = MirrorCache::new(dir)
            .with_retry(quick())
            .update("gitea/acme/demo", &u, &token(TOKEN))
            .unwrap();
        mirror.repo.refname_to_id("refs/heads/main").unwrap()
    })
    .await
    .unwrap();
    assert_eq!(server.faults(|f| f.served), 2);
    assert_eq!(server.count(GitRequest::FetchPack, 200), 1);

    // An incremental fetch: a new commit on the server, a 500 on its pack.
    let (u, seed) = (url.clone(), served.root.path().join("seed"));
    let newer = tokio::task::spawn_blocking(move || {
        let (repo, oid) = commit_on(&seed, "main", "b.txt", Some(main));
        transport::push(
            &repo,
            &u,
            &["refs/heads/main:refs/heads/main"],
            &token(TOKEN),
        )
        .unwrap();
        oid
    })
    .await
    .unwrap();
    server.faults(|f| f.next.push(GitFault::new(GitRequest::FetchPack, 500)));
    let (u, dir) = (url.clone(), cache_dir.clone());
    let fetched = tokio::task::spawn_blocking(move || {
        let mirror = MirrorCache::new(dir)
            .with_retry(quick())
            .update("gitea/acme/demo", &u, &token(TOKEN))
            .unwrap();
        mirror.repo.refname_to_id("refs/heads/main").unwrap()
    })
    .await
    .unwrap();
    assert_eq!(fetched, newer);
    assert_eq!(server.faults(|f| f.served), 3);

    // The same fault without the retry ends the call, and says which.
    server.faults(|f| f.next.push(GitFault::new(GitRequest::FetchRefs, 502)));
    let (u, dir) = (url.clone(), cache_dir.clone());
    let error = tokio::task::spawn_blocking(move || {
        MirrorCache::new(dir)
            .with_retry(once())
            .update("gitea/acme/demo", &u, &token(TOKEN))
            .err()
            .expect("one try meets the 502")
    })
    .await
    .unwrap();
    assert!(error.is_transient(), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("git fetch {url}: unexpected http status code: 502")
    );
}

/// Pushes the local `forgehand/1-fix` of `repo` with `policy`.
fn push(
    repo: &git2::Repository,
    url: &str,
    expected: Option<git2::Oid>,
    policy: &RetryPolicy,
) -> Result<(), PushError> {
    push_branch_with(
        repo,
        &PushRequest {
            url,
            branch: "forgehand/1-fix",
            default_branch: "main",
            prefix: "forgehand/",
            expected,
        },
        &token(TOKEN),
        policy,
    )
}

/// [`push`] of the repository at `dir`, off the async runtime.
async fn pushed(
    url: &str,
    dir: &Path,
    expected: Option<git2::Oid>,
    policy: RetryPolicy,
) -> Result<(), PushError> {
    let (url, dir) = (url.to_owned(), dir.to_owned());
    tokio::task::spawn_blocking(move || {
        push(
            &git2::Repository::open(dir).unwrap(),
            &url,
            expected,
            &policy,
        )
    })
    .await
    .unwrap()
}

fn heads(url: &str) -> Vec<(String, git2::Oid)> {
    transport::remote_heads(url, &token(TOKEN)).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_meeting_server_errors_goes_through_within_the_call_and_fails_without_the_retry() {
    let served = served().await;
    let server = &served.server;
    let (url, dir) = (served.url.clone(), served.root.path().join("local"));
    // The bot's branch as an earlier job left it, and the new commit.
    let first = tokio::task::spawn_blocking({
        let (url, dir) = (url.clone(), dir.clone());
        move || {
            let (repo, first) = commit_on(&dir, "forgehand/1-fix", "fix.txt", None);
            push(&repo, &url, None, &quick()).unwrap();
            commit_on(&dir, "forgehand/1-fix", "more.txt", Some(first));
            first
        }
    })
    .await
    .unwrap();
    // Without the retry, a 503 on the lease's ls-remote ends the push…
    server.faults(|f| f.next.push(GitFault::new(GitRequest::FetchRefs, 503)));
    let error = pushed(&url, &dir, Some(first), once()).await.unwrap_err();
    assert!(error.worth_another_attempt(), "{error:?}");
    assert_names_the_call(&error.to_string(), "git ls-remote", &url);
    // …and so does a 500 on the pack.
    server.faults(|f| f.next.push(GitFault::new(GitRequest::PushPack, 500)));
    let error = pushed(&url, &dir, Some(first), once()).await.unwrap_err();
    assert_names_the_call(&error.to_string(), "git push", &url);
    assert!(
        error
            .to_string()
            .ends_with("unexpected http status code: 500"),
        "{error}"
    );

    // With the retry, the same faults and one more are waited out.
    server.faults(|f| {
        f.next.push(GitFault::new(GitRequest::FetchRefs, 502));
        f.next.push(GitFault::new(GitRequest::PushRefs, 503));
        f.next.push(GitFault::new(GitRequest::PushPack, 500));
    });
    pushed(&url, &dir, Some(first), quick()).await.unwrap();
    assert_eq!(server.faults(|f| f.next.len()), 0, "every fault was met");
    let second = git2::Repository::open(&dir)
        .unwrap()
        .refname_to_id("refs/heads/forgehand/1-fix")
        .unwrap();
    let u = url.clone();
    let on_server = tokio::task::spawn_blocking(move || heads(&u))
        .await
        .unwrap();
    assert!(
        on_server.contains(&("refs/heads/forgehand/1-fix".into(), second)),
        "{on_server:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_that_landed_but_whose_answer_was_lost_is_recognised_not_pushed_again() {
    let served = served().await;
    let server = &served.server;
    let (url, dir) = (served.url.clone(), served.root.path().join("local"));
    server.faults(|f| {
        f.next.push(GitFault {
            on: GitRequest::PushPack,
            status: 502,
            retry_after: None,
            after_serving: true,
        })
    });
    let (ours, on_server) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            let (repo, oid) = commit_on(&dir, "forgehand/1-fix", "fix.txt", None);
            // New on the server: the lease is "absent". After the lost
            // answer the branch is there, at our commit: success.
            push(&repo, &url, None, &quick()).unwrap();
            (oid, heads(&url))
        }
    })
    .await
    .unwrap();
    assert!(
        on_server.contains(&("refs/heads/forgehand/1-fix".into(), ours)),
        "{on_server:?}"
    );
    assert_eq!(
        (
            server.count(GitRequest::PushPack, 502),
            server.count(GitRequest::PushPack, 200)
        ),
        (1, 0),
        "pushed once: the retry found it landed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_on_git_is_waited_out() {
    let served = served().await;
    served.server.faults(|f| {
        f.next.push(GitFault {
            on: GitRequest::FetchRefs,
            status: 429,
            retry_after: Some(1),
            after_serving: false,
        })
    });
    let (url, dir) = (served.url.clone(), served.root.path().join("cache"));
    tokio::task::spawn_blocking(move || {
        MirrorCache::new(dir)
            .with_retry(quick())
            .update("github/acme/demo", &url, &token(TOKEN))
            .unwrap();
    })
    .await
    .unwrap();
    assert_eq!(served.server.count(GitRequest::FetchRefs, 429), 1);
    // libgit2 does not show the Retry-After: a rate limit waits a second
    // at least, not the 20 ms of a server error. Measured by the server,
    // from the 429's answer to the next request (a lower bound: a loaded
    // machine only waits longer).
    let seen = served.server.seen();
    let limited = seen
        .iter()
        .position(|r| r.kind == Some(GitRequest::FetchRefs) && r.status == 429)
        .unwrap();
    let next = seen[limited + 1..]
        .iter()
        .map(|r| r.received)
        .filter(|&received| received > seen[limited].received)
        .min()
        .expect("a request after the rate limit");
    let waited = next.duration_since(seen[limited].answered);
    assert!(waited >= Duration::from_secs(1), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_credentials_a_refused_push_and_a_missing_repository_fail_at_once() {
    let served = served().await;
    let server = &served.server;
    let (url, root) = (served.url.clone(), served.root.path().to_owned());

    let wrong = "ghs_wrong-token-value-0123456789";
    let error = tokio::task::spawn_blocking({
        let (url, dir) = (url.clone(), root.join("cache-wrong"));
        move || {
            MirrorCache::new(dir)
                .with_retry(quick())
                .update("github/acme/demo", &url, &token(wrong))
                .err()
                .expect("refused")
        }
    })
    .await
    .unwrap();
    assert!(matches!(error.root(), TransportError::Auth(_)), "{error:?}");
    assert!(!error.is_transient());
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "git fetch {url}: the git server refused the credentials"
        )),
        "{message}"
    );
    assert!(!message.contains(wrong), "{message}");
    // One try: the unauthenticated ask and the one answer, both 401.
    assert_eq!(server.count(GitRequest::FetchRefs, 401), 2);

    // A hook that refuses the branch, as a protected branch's would.
    let hook = root.join("demo.git/hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'protected branch' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let error = tokio::task::spawn_blocking({
        let (url, dir) = (url.clone(), root.join("local"));
        move || {
            let (repo, _) = commit_on(&dir, "forgehand/1-fix", "fix.txt", None);
            push(&repo, &url, None, &quick()).unwrap_err()
        }
    })
    .await
    .unwrap();
    assert!(
        matches!(&error, PushError::Transport(e) if matches!(e.root(), TransportError::Rejected(_))),
        "{error:?}"
    );
    assert!(!error.worth_another_attempt());
    assert_names_the_call(&error.to_string(), "git push", &url);
    assert!(error.to_string().contains("hook declined"), "{error}");
    assert_eq!(server.count(GitRequest::PushPack, 200), 1, "pushed once");

    let missing = format!("{}/missing.git", server.base_url);
    let error = tokio::task::spawn_blocking({
        let (url, dir) = (missing.clone(), root.join("cache-missing"));
        move || {
            MirrorCache::new(dir)
                .with_retry(quick())
                .update("github/acme/missing", &url, &token(TOKEN))
                .err()
                .expect("no such repository")
        }
    })
    .await
    .unwrap();
    assert!(!error.is_transient(), "{error:?}");
    assert_names_the_call(&error.to_string(), "git fetch", &missing);
    let tries = server
        .seen()
        .iter()
        .filter(|r| r.path.starts_with("/missing.git") && r.status == 404)
        .count();
    assert_eq!(tries, 1, "tried once");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_failing_every_time_is_given_up_on_naming_the_call() {
    let served = served().await;
    served.server.faults(|f| f.every = Some(1));
    let (url, dir) = (served.url.clone(), served.root.path().join("cache"));
    let error = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            MirrorCache::new(dir)
                .with_retry(RetryPolicy {
                    attempts: 3,
                    first_backoff: Duration::from_millis(10),
                    longest_wait: Duration::from_millis(50),
                })
                .update("github/acme/demo", &url, &token(TOKEN))
                .err()
                .expect("fails every time")
        }
    })
    .await
    .unwrap();
    // 500, 502, 503 in turn: the last one is what the error says.
    assert_eq!(
        error.to_string(),
        format!("git fetch {url}: unexpected http status code: 503 (3 tries)")
    );
    assert!(error.is_transient());
    assert_eq!(served.server.faults(|f| f.served), 3);
}

/// A mirror a killed fetch left with git's lock files in it is fetched
/// into again, not refused for ever ("failed to lock file").
#[tokio::test(flavor = "multi_thread")]
async fn a_mirror_a_killed_fetch_left_locked_is_fetched_again() {
    let served = served().await;
    let (url, root) = (served.url.clone(), served.root.path().to_owned());
    tokio::task::spawn_blocking(move || {
        let cache = MirrorCache::new(root.join("cache")).with_retry(quick());
        let mirror = cache
            .update("github/acme/demo", &url, &token(TOKEN))
            .unwrap();
        let (path, main) = (
            mirror.path.clone(),
            mirror.repo.refname_to_id("refs/heads/main").unwrap(),
        );
        drop(mirror);
        for lock in [
            "packed-refs.lock",
            "FETCH_HEAD.lock",
            "refs/heads/main.lock",
        ] {
            std::fs::write(path.join(lock), "").unwrap();
        }
        // Something to fetch: `main` moves on the server.
        let (seed, newer) = commit_on(&root.join("seed"), "main", "b.txt", Some(main));
        transport::push(
            &seed,
            &url,
            &["refs/heads/main:refs/heads/main"],
            &token(TOKEN),
        )
        .unwrap();
        let mirror = cache
            .update("github/acme/demo", &url, &token(TOKEN))
            .unwrap();
        assert_eq!(mirror.repo.refname_to_id("refs/heads/main").unwrap(), newer);
    })
    .await
    .unwrap();
}
