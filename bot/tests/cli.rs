//! The `forgehand` command line: `check-config` shows the effective
//! configuration with secrets redacted and fails on a bad one.

use std::process::{Command, Output};

fn forgehand(args: &[&str], env: &[(&str, &str)], dir: &std::path::Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_forgehand"));
    command.args(args).env_clear().current_dir(dir);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the forgehand binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn check_config_prints_the_effective_configuration_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forgehand.toml"),
        "[github]\nwebhook_secret = [\"file-secret-1\"]\n[queue]\nworkers = 4\n",
    )
    .unwrap();
    let out = forgehand(
        &["check-config", "--config", "forgehand.toml"],
        &[
            ("FORGEHAND_API__TOKEN", "env-token-2"),
            ("FORGEHAND_BOT__LABEL", "ai"),
        ],
        dir.path(),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("workers = 4"),
        "the file is read:\n{stdout}"
    );
    assert!(
        stdout.contains("label = \"ai\""),
        "the environment overrides it:\n{stdout}"
    );
    assert!(stdout.contains("<redacted>"));
    for secret in ["file-secret-1", "env-token-2"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} leaked"
        );
    }
    assert!(stderr.contains("configuration is valid"), "{stderr}");
    assert!(
        stderr.contains("configuration from forgehand.toml (--config)"),
        "{stderr}"
    );
}

#[test]
fn a_forgehand_toml_in_the_working_directory_is_not_read() {
    // The working directory may be a repository's: its forgehand.toml
    // must not configure the host.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forgehand.toml"),
        "[model]\nbase_url = \"http://127.0.0.1:9/v1\"\n[queue]\nworkers = 9\n",
    )
    .unwrap();
    let out = forgehand(&["check-config"], &[], dir.path());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(!stdout.contains("127.0.0.1:9/"), "{stdout}");
    if !std::path::Path::new("/etc/forgehand/forgehand.toml").exists() {
        assert!(stdout.contains("workers = 2"), "defaults:\n{stdout}");
        assert!(stderr.contains("no configuration file"), "{stderr}");
    }
    // Named by the variable, it is read, and said so.
    let out = forgehand(
        &["check-config"],
        &[("FORGEHAND_CONFIG", "forgehand.toml")],
        dir.path(),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(stdout.contains("workers = 9"), "{stdout}");
    assert!(
        stderr.contains("configuration from forgehand.toml ($FORGEHAND_CONFIG)"),
        "{stderr}"
    );
}

#[test]
fn check_config_fails_with_every_problem_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = forgehand(
        &["check-config"],
        &[
            ("FORGEHAND_SERVER__LISTEN", "localhost"),
            ("FORGEHAND_QUEUE__LEASE_SECS", "1"),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("server.listen: `localhost` is not an address like 127.0.0.1:8080"),
        "{stderr}"
    );
    assert!(stderr.contains("queue.lease_secs"), "{stderr}");
}

#[test]
fn a_named_configuration_file_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    let out = forgehand(
        &["check-config", "--config", "missing.toml"],
        &[],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("missing.toml does not exist"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn serve_refuses_to_start_when_it_cannot_listen() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = forgehand(
        &["serve"],
        &[
            ("FORGEHAND_SERVER__LISTEN", &addr),
            ("FORGEHAND_DATABASE__URL", "sqlite://forgehand.db"),
            ("FORGEHAND_LOG__FORMAT", "json"),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on {addr} (server.listen)")),
        "{stderr}"
    );
    // JSON logs: every log line is one JSON object.
    let json_lines: Vec<_> = stderr.lines().filter(|l| l.starts_with('{')).collect();
    assert!(!json_lines.is_empty(), "no JSON log line in:\n{stderr}");
    for line in json_lines {
        serde_json::from_str::<serde_json::Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
}
