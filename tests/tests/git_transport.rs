//! Host-side git transport (forgehand-forge's `git::transport`, on git2)
//! against real servers on 127.0.0.1: smart HTTP behind basic auth and
//! OpenSSH with key-only login and a pinned host key. Clone, fetch,
//! branch, commit, push over both; a wrong token, an unknown key and a
//! changed host key each fail with a clear error.

use std::path::Path;

use forgehand_forge::git::transport::{self, Credentials, TransportError};
use forgehand_tests::git_http::GitHttpServer;
use forgehand_tests::git_ssh::{keygen, GitSshServer};
use secrecy::SecretString;

const TOKEN: &str = "ghs_test-token-not-real-0123456789";

fn bare_repo(dir: &Path) {
    git2::Repository::init_opts(
        dir,
        git2::RepositoryInitOptions::new()
            .bare(true)
            .initial_head("main"),
    )
    .unwrap();
}

/// A local repository with one commit on `branch`.
fn local_commit(dir: &Path, branch: &str, file: &str) -> (git2::Repository, git2::Oid) {
    let repo = git2::Repository::init(dir).unwrap();
    std::fs::write(dir.join(file), format!("{file}\n")).unwrap();
    let oid = {
        let mut index = repo.index().unwrap();
        index.add_path(Path::new(file)).unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("forgehand", "forgehand@example.invalid").unwrap();
        repo.commit(
            Some(&format!("refs/heads/{branch}")),
            &sig,
            &sig,
            "work",
            &tree,
            &[],
        )
        .unwrap()
    };
    (repo, oid)
}

/// An empty bare `demo.git` served over smart HTTP to `bot` with
/// [`TOKEN`]; the temp dir lives as long as the first value.
async fn http_demo() -> (tempfile::TempDir, GitHttpServer, String) {
    let root = tempfile::tempdir().unwrap();
    bare_repo(&root.path().join("demo.git"));
    let server = GitHttpServer::start(root.path(), "bot", TOKEN)
        .await
        .unwrap();
    let url = format!("{}/demo.git", server.base_url);
    (root, server, url)
}

fn bot() -> forgehand_gate::BotIdentity {
    forgehand_gate::BotIdentity {
        name: "forgehand[bot]".into(),
        email: "forgehand@example.invalid".into(),
    }
}

fn token(value: &str) -> Credentials {
    Credentials::Token {
        username: "bot".into(),
        token: SecretString::from(value.to_owned()),
    }
}

fn round_trip(url: &str, credentials: &Credentials) {
    let work = tempfile::tempdir().unwrap();
    let (local, oid) = local_commit(&work.path().join("local"), "forgehand/1-fix", "a.txt");
    transport::push(
        &local,
        url,
        &["refs/heads/forgehand/1-fix:refs/heads/forgehand/1-fix"],
        credentials,
    )
    .unwrap();

    let mirror = transport::clone_bare(&work.path().join("mirror.git"), url, credentials).unwrap();
    let got = mirror
        .find_reference("refs/heads/forgehand/1-fix")
        .unwrap()
        .target();
    assert_eq!(got, Some(oid));

    // A second push, then an incremental fetch into the mirror.
    let (_, second) = local_commit(&work.path().join("local2"), "forgehand/2-more", "b.txt");
    let local2 = git2::Repository::open(work.path().join("local2")).unwrap();
    transport::push(
        &local2,
        url,
        &["refs/heads/forgehand/2-more:refs/heads/forgehand/2-more"],
        credentials,
    )
    .unwrap();
    transport::fetch(&mirror, url, &["+refs/heads/*:refs/heads/*"], credentials).unwrap();
    assert_eq!(
        mirror
            .find_reference("refs/heads/forgehand/2-more")
            .unwrap()
            .target(),
        Some(second)
    );
    // Nothing about the remote, let alone a credential, was written down.
    let config = std::fs::read_to_string(work.path().join("mirror.git/config")).unwrap();
    assert!(!config.contains("remote"), "{config}");
    assert!(!config.contains(TOKEN), "{config}");
}

#[tokio::test(flavor = "multi_thread")]
async fn https_with_a_token_and_a_wrong_token_refused() {
    let (_root, server, url) = http_demo().await;

    let url2 = url.clone();
    tokio::task::spawn_blocking(move || round_trip(&url2, &token(TOKEN)))
        .await
        .unwrap();
    assert!(server
        .seen()
        .iter()
        .any(|r| r.status == 200 && r.path.ends_with("git-receive-pack")));

    let error = tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        transport::clone_bare(&dir.path().join("m.git"), &url, &token("wrong-token-value"))
            .err()
            .expect("refused")
    })
    .await
    .unwrap();
    assert!(matches!(error, TransportError::Auth(_)), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("refused the credentials") && message.contains("127.0.0.1"),
        "{message}"
    );
    assert!(!message.contains("wrong-token-value"), "{message}");
}

#[test]
fn ssh_with_a_key_and_a_pinned_host_key_and_each_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let repos = dir.path().join("repos");
    bare_repo(&repos.join("demo.git"));
    let client = keygen(dir.path(), "client").unwrap();
    let stranger = keygen(dir.path(), "stranger").unwrap();
    let server = GitSshServer::start(&[&client.public]).unwrap();
    let url = server.url(&repos.join("demo.git"));
    let ssh = |key: &Path, known: Vec<String>| Credentials::SshKey {
        username: server.user.clone(),
        private_key: key.to_owned(),
        passphrase: None,
        known_hosts: known,
    };
    let pinned = vec![server.known_hosts_line.clone()];

    round_trip(&url, &ssh(&client.private, pinned.clone()));

    let clone = |credentials: Credentials| {
        let into = tempfile::tempdir().unwrap();
        transport::clone_bare(&into.path().join("m.git"), &url, &credentials)
            .err()
            .expect("refused")
    };
    let error = clone(ssh(&stranger.private, pinned.clone()));
    assert!(
        matches!(error, TransportError::Auth(_)),
        "unknown key: {error:?}"
    );

    let other_host = keygen(dir.path(), "other_host").unwrap();
    let wrong_pin = format!(
        "[127.0.0.1]:{} {}",
        server.port,
        other_host
            .public
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let error = clone(ssh(&client.private, vec![wrong_pin]));
    assert!(
        matches!(error, TransportError::HostKeyMismatch { .. }),
        "changed host key: {error:?}"
    );
    assert!(error.to_string().contains("not the pinned one"));

    let error = clone(ssh(&client.private, Vec::new()));
    assert!(
        matches!(error, TransportError::NoPinnedHostKey { .. }),
        "no pin: {error:?}"
    );
}

/// The mirror cache over smart HTTP: cloned once, fetched after; each job
/// gets a working copy on its own branch with no remote in it; jobs on
/// one repository take turns on the mirror.
#[tokio::test(flavor = "multi_thread")]
async fn mirror_cache_and_working_copies() {
    use forgehand_forge::git::{branch_name, MirrorCache};

    let (_root, _server, url) = http_demo().await;
    tokio::task::spawn_blocking(move || {
        let work = tempfile::tempdir().unwrap();
        let (local, first) = local_commit(&work.path().join("local"), "main", "a.txt");
        transport::push(
            &local,
            &url,
            &["refs/heads/main:refs/heads/main"],
            &token(TOKEN),
        )
        .unwrap();

        let cache = MirrorCache::new(work.path().join("cache"));
        let mirror = cache
            .update("gitea/acme/demo", &url, &token(TOKEN))
            .unwrap();
        let branch = branch_name("forgehand/{number}-{slug}", 12, "Fix the README");
        let copy = mirror
            .working_copy(
                &work.path().join("job-1"),
                &work.path().join("job-1.git"),
                "main",
                &branch,
            )
            .unwrap();
        assert_eq!(
            copy.head().unwrap().shorthand(),
            Some("forgehand/12-fix-the-readme")
        );
        assert_eq!(copy.head().unwrap().target(), Some(first));
        assert!(work.path().join("job-1/a.txt").exists());
        assert!(
            !work.path().join("job-1/.git").exists(),
            "no git directory in the tree the sandbox sees"
        );
        assert!(
            copy.remotes().unwrap().is_empty(),
            "the working copy names no remote"
        );
        // The host finds the work tree from the git directory alone.
        let reopened = git2::Repository::open(work.path().join("job-1.git")).unwrap();
        assert_eq!(
            reopened.workdir().map(|p| p.canonicalize().unwrap()),
            Some(work.path().join("job-1").canonicalize().unwrap())
        );
        drop(mirror);

        // Jobs on one repository at once: each waits for the mirror, and
        // both get a good one.
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let (cache, url, dest) = (
                    cache.clone(),
                    url.clone(),
                    work.path().join(format!("job-c{i}")),
                );
                std::thread::spawn(move || {
                    let mirror = cache
                        .update("gitea/acme/demo", &url, &token(TOKEN))
                        .unwrap();
                    mirror
                        .working_copy(
                            &dest,
                            &dest.with_extension("git"),
                            "main",
                            &format!("forgehand/{i}-x"),
                        )
                        .unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let err = cache
            .update("../escape", &url, &token(TOKEN))
            .err()
            .expect("refused");
        assert!(err.to_string().contains("not a repository key"), "{err}");
    })
    .await
    .unwrap();
}

/// Committing as the bot with its trailers, and pushing only where the
/// bot may: its own branches, never the default one, never over work
/// someone else pushed meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn commit_as_the_bot_and_push_only_to_its_own_branch() {
    use forgehand_forge::git::{push_branch, PushError, PushRequest};
    use forgehand_gate::{commit_all, CommitRequest};

    let (_root, _server, url) = http_demo().await;
    tokio::task::spawn_blocking(move || {
        let work = tempfile::tempdir().unwrap();
        let dir = work.path().join("local");
        let (repo, _) = local_commit(&dir, "forgehand/3-fix", "a.txt");
        repo.set_head("refs/heads/forgehand/3-fix").unwrap();
        let bot = bot();
        let request = CommitRequest {
            message: "Fix the thing",
            co_author: Some(("Maintainer", "m@example.invalid")),
            job: forgehand_types::JobId(77),
        };
        assert_eq!(commit_all(&repo, &bot, &request).unwrap(), None, "nothing changed yet");
        std::fs::write(dir.join("a.txt"), "changed\n").unwrap();
        std::fs::write(dir.join("new.txt"), "new\n").unwrap();
        let oid = commit_all(&repo, &bot, &request).unwrap().expect("a commit");
        let commit = repo.find_commit(oid).unwrap();
        assert_eq!(commit.author().name(), Some("forgehand[bot]"));
        assert_eq!(
            commit.message(),
            Some("Fix the thing\n\nCo-authored-by: Maintainer <m@example.invalid>\nForgehand-Job: 77\n")
        );

        let push = |branch: &str, expected| {
            push_branch(
                &repo,
                &PushRequest {
                    url: &url,
                    branch,
                    default_branch: "main",
                    prefix: "forgehand/",
                    expected,
                },
                &token(TOKEN),
            )
        };
        push("forgehand/3-fix", None).unwrap();
        assert!(matches!(push("main", None), Err(PushError::DefaultBranch { .. })));
        assert!(matches!(push("feature/x", None), Err(PushError::NotOurs { .. })));
        // The server's branch is at `oid` now: pushing it again, even as
        // if it were new, finds it there (a push whose answer was lost),
        // and overwrites nothing. Pushing after someone else moved it is
        // refused.
        push("forgehand/3-fix", None).unwrap();
        let (other, theirs) = local_commit(&work.path().join("other"), "forgehand/3-fix", "theirs.txt");
        transport::push(&other, &url, &["+refs/heads/forgehand/3-fix:refs/heads/forgehand/3-fix"], &token(TOKEN))
            .unwrap();
        assert_ne!(theirs, oid);
        let err = push("forgehand/3-fix", Some(oid)).unwrap_err();
        assert!(matches!(err, PushError::Stale { .. }), "{err:?}");
        assert!(matches!(push("forgehand/3-fix", None), Err(PushError::Stale { .. })));
        push("forgehand/3-fix", Some(theirs)).unwrap();
    })
    .await
    .unwrap();
}

/// The agent plays with git's own files in its tree: a `.git` directory
/// with hooks and a config naming an fsmonitor and a hooks path. The
/// host commits, checks out and pushes from its own git directory: none of
/// the canaries ever appears, and none of those files is committed.
#[tokio::test(flavor = "multi_thread")]
async fn canary_hooks_and_fsmonitor_planted_in_the_tree_never_run_on_the_host() {
    use forgehand_forge::git::{push_branch, MirrorCache, PushRequest};
    use forgehand_gate::{commit_all, CommitRequest};

    let (_root, _server, url) = http_demo().await;
    tokio::task::spawn_blocking(move || {
        let work = tempfile::tempdir().unwrap();
        let (local, _) = local_commit(&work.path().join("local"), "main", "a.txt");
        transport::push(
            &local,
            &url,
            &["refs/heads/main:refs/heads/main"],
            &token(TOKEN),
        )
        .unwrap();
        let mirror = MirrorCache::new(work.path().join("cache"))
            .update("github/acme/demo", &url, &token(TOKEN))
            .unwrap();
        let (tree, git_dir) = (work.path().join("job"), work.path().join("job.git"));
        mirror
            .working_copy(&tree, &git_dir, "main", "forgehand/5-x")
            .unwrap();

        // The agent, inside its tree.
        let canaries = work.path().join("canaries");
        std::fs::create_dir(&canaries).unwrap();
        let hook = |name: &str| format!("#!/bin/sh\ntouch {}/{name}\n", canaries.display());
        std::fs::create_dir_all(tree.join(".git/hooks")).unwrap();
        for name in [
            "pre-commit",
            "pre-push",
            "post-checkout",
            "reference-transaction",
        ] {
            let path = tree.join(".git/hooks").join(name);
            std::fs::write(&path, hook(name)).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
        let fsmonitor = tree.join("fsmonitor.sh");
        std::fs::write(&fsmonitor, hook("fsmonitor")).unwrap();
        std::fs::set_permissions(
            &fsmonitor,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(
            tree.join(".git/config"),
            format!(
                "[core]\n\tfsmonitor = {}\n\thooksPath = {}\n",
                fsmonitor.display(),
                tree.join(".git/hooks").display()
            ),
        )
        .unwrap();
        std::fs::write(tree.join("a.txt"), "the agent's change\n").unwrap();

        // The host.
        let repo = git2::Repository::open(&git_dir).unwrap();
        let bot = bot();
        let oid = commit_all(
            &repo,
            &bot,
            &CommitRequest {
                message: "work",
                co_author: None,
                job: forgehand_types::JobId(1),
            },
        )
        .unwrap()
        .expect("a commit");
        repo.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
            .unwrap();
        push_branch(
            &repo,
            &PushRequest {
                url: &url,
                branch: "forgehand/5-x",
                default_branch: "main",
                prefix: "forgehand/",
                expected: None,
            },
            &token(TOKEN),
        )
        .unwrap();

        let appeared: Vec<_> = std::fs::read_dir(&canaries)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            appeared.is_empty(),
            "canaries ran on the host: {appeared:?}"
        );
        let tree_of = repo.find_commit(oid).unwrap().tree().unwrap();
        assert!(
            tree_of.get_name(".git").is_none(),
            "the planted .git was committed"
        );
        assert!(tree_of.get_name("a.txt").is_some());
    })
    .await
    .unwrap();
}

/// A follow-up job: the mirror is fetched again, the working copy starts
/// from the bot's existing branch, and the new commit goes on top of the
/// last one with the lease taken from where the branch stood.
#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_continues_the_bots_branch() {
    use forgehand_forge::git::{push_branch, MirrorCache, PushError, PushRequest};
    use forgehand_gate::{commit_all, CommitRequest};

    let (_root, _server, url) = http_demo().await;
    tokio::task::spawn_blocking(move || {
        let work = tempfile::tempdir().unwrap();
        let (local, _) = local_commit(&work.path().join("local"), "main", "a.txt");
        transport::push(
            &local,
            &url,
            &["refs/heads/main:refs/heads/main"],
            &token(TOKEN),
        )
        .unwrap();
        let cache = MirrorCache::new(work.path().join("cache"));
        let branch = "forgehand/4-first";
        let push = |repo: &git2::Repository, expected| {
            push_branch(
                repo,
                &PushRequest {
                    url: &url,
                    branch,
                    default_branch: "main",
                    prefix: "forgehand/",
                    expected,
                },
                &token(TOKEN),
            )
        };
        let request = |job| CommitRequest {
            message: "work",
            co_author: None,
            job,
        };

        // The first job opens the branch.
        let mirror = cache
            .update("github/acme/demo", &url, &token(TOKEN))
            .unwrap();
        let (tree, git_dir) = (work.path().join("j1"), work.path().join("j1.git"));
        let first_repo = mirror
            .working_copy(&tree, &git_dir, "main", branch)
            .unwrap();
        drop(mirror);
        std::fs::write(tree.join("a.txt"), "first\n").unwrap();
        let first = commit_all(&first_repo, &bot(), &request(forgehand_types::JobId(1)))
            .unwrap()
            .unwrap();
        push(&first_repo, None).unwrap();

        // The review's follow-up starts where the first job left off.
        let mirror = cache
            .update("github/acme/demo", &url, &token(TOKEN))
            .unwrap();
        let (tree, git_dir) = (work.path().join("j2"), work.path().join("j2.git"));
        let (repo, tip) = mirror.follow_up_copy(&tree, &git_dir, branch).unwrap();
        drop(mirror);
        assert_eq!(tip, first);
        assert_eq!(
            std::fs::read_to_string(tree.join("a.txt")).unwrap(),
            "first\n"
        );
        assert_eq!(repo.head().unwrap().shorthand(), Some(branch));
        std::fs::write(tree.join("a.txt"), "second\n").unwrap();
        let second = commit_all(&repo, &bot(), &request(forgehand_types::JobId(2)))
            .unwrap()
            .unwrap();
        assert_eq!(
            repo.find_commit(second).unwrap().parent_id(0).unwrap(),
            first
        );
        // A stale lease (as if the branch were new) is refused; the right one pushes.
        assert!(matches!(push(&repo, None), Err(PushError::Stale { .. })));
        push(&repo, Some(tip)).unwrap();
        let heads = transport::remote_heads(&url, &token(TOKEN)).unwrap();
        assert!(
            heads.contains(&(format!("refs/heads/{branch}"), second)),
            "{heads:?}"
        );

        let mirror = cache
            .update("github/acme/demo", &url, &token(TOKEN))
            .unwrap();
        let err = mirror
            .follow_up_copy(
                &work.path().join("j3"),
                &work.path().join("j3.git"),
                "forgehand/99-gone",
            )
            .err()
            .expect("no such branch");
        assert!(err.message().contains("not in the mirror"), "{err}");
    })
    .await
    .unwrap();
}
