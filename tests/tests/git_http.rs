//! The test git server itself, checked with the git command line: smart
//! HTTP protocol v2 behind basic auth, clone and push, and a wrong
//! password refused. (Host-side git with git2 is tested against it.)

use std::path::Path;
use std::process::Output;

use forgehand_tests::git_http::GitHttpServer;

async fn git(dir: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .await
        .expect("git runs (apt-get install git)")
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "git failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn clone_and_push_over_smart_http_v2_with_basic_auth() {
    let root = tempfile::tempdir().unwrap();
    ok(&git(
        root.path(),
        &["init", "--bare", "--initial-branch=main", "demo.git"],
    )
    .await);
    let server = GitHttpServer::start(root.path(), "bot", "s3cret-pass")
        .await
        .unwrap();
    let url = server
        .base_url
        .replace("http://", "http://bot:s3cret-pass@")
        + "/demo.git";

    let work = tempfile::tempdir().unwrap();
    ok(&git(
        work.path(),
        &["-c", "protocol.version=2", "clone", &url, "one"],
    )
    .await);
    let one = work.path().join("one");
    std::fs::write(one.join("README.md"), "hello\n").unwrap();
    ok(&git(&one, &["add", "README.md"]).await);
    ok(&git(&one, &["commit", "-m", "first"]).await);
    ok(&git(&one, &["push", "origin", "HEAD:main"]).await);

    ok(&git(
        work.path(),
        &["-c", "protocol.version=2", "clone", &url, "two"],
    )
    .await);
    assert_eq!(
        std::fs::read_to_string(work.path().join("two/README.md")).unwrap(),
        "hello\n"
    );
    let seen = server.seen();
    assert!(
        seen.iter()
            .any(|r| r.git_protocol.as_deref() == Some("version=2")),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|r| r.method == "POST"
            && r.path == "/demo.git/git-receive-pack"
            && r.status == 200),
        "{seen:?}"
    );

    let wrong = server.base_url.replace("http://", "http://bot:wrong@") + "/demo.git";
    let out = git(work.path(), &["clone", &wrong, "three"]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Authentication failed"), "{stderr}");
    assert!(server.seen().iter().any(|r| r.status == 401));
}
