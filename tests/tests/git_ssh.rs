//! The test SSH server itself, checked with the git command line: clone
//! and push with an authorized key and a pinned host key; an unknown key
//! and a changed host key refused. (Host-side git with git2 is tested
//! against it.)

use std::path::Path;
use std::process::Output;

use forgehand_tests::git_ssh::{keygen, GitSshServer, KeyPair};

fn git(dir: &Path, key: &KeyPair, known_hosts: &Path, port: u16, args: &[&str]) -> Output {
    let ssh = format!(
        "ssh -F /dev/null -i {} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={} -p {port}",
        key.private.display(),
        known_hosts.display()
    );
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_SSH_COMMAND", ssh)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs")
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "git failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn clone_and_push_with_a_key_and_a_pinned_host_key() {
    let dir = tempfile::tempdir().unwrap();
    let repos = dir.path().join("repos");
    std::fs::create_dir(&repos).unwrap();
    let init = std::process::Command::new("git")
        .args(["init", "-q", "--bare", "--initial-branch=main", "demo.git"])
        .current_dir(&repos)
        .output()
        .unwrap();
    ok(&init);
    let client = keygen(dir.path(), "client").unwrap();
    let stranger = keygen(dir.path(), "stranger").unwrap();
    let server = GitSshServer::start(&[&client.public]).unwrap();
    let known = dir.path().join("known_hosts");
    std::fs::write(&known, format!("{}\n", server.known_hosts_line)).unwrap();
    let url = server.url(&repos.join("demo.git"));

    ok(&git(
        dir.path(),
        &client,
        &known,
        server.port,
        &["clone", "-q", &url, "one"],
    ));
    let one = dir.path().join("one");
    std::fs::write(one.join("f.txt"), "over ssh\n").unwrap();
    ok(&git(&one, &client, &known, server.port, &["add", "f.txt"]));
    ok(&git(
        &one,
        &client,
        &known,
        server.port,
        &["commit", "-q", "-m", "first"],
    ));
    ok(&git(
        &one,
        &client,
        &known,
        server.port,
        &["push", "-q", "origin", "HEAD:main"],
    ));
    ok(&git(
        dir.path(),
        &client,
        &known,
        server.port,
        &["clone", "-q", &url, "two"],
    ));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("two/f.txt")).unwrap(),
        "over ssh\n"
    );

    let out = git(
        dir.path(),
        &stranger,
        &known,
        server.port,
        &["clone", "-q", &url, "three"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Permission denied (publickey)"), "{stderr}");

    let other_host = keygen(dir.path(), "other_host").unwrap();
    let mut blob = other_host.public.split_whitespace().skip(1);
    let changed = dir.path().join("known_hosts_changed");
    std::fs::write(
        &changed,
        format!(
            "[127.0.0.1]:{} ssh-ed25519 {}\n",
            server.port,
            blob.next().unwrap()
        ),
    )
    .unwrap();
    let out = git(
        dir.path(),
        &client,
        &changed,
        server.port,
        &["clone", "-q", &url, "four"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Host key verification failed"), "{stderr}");
}
