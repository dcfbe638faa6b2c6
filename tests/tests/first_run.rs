//! The first-run suite: what a new user runs, from nothing but what the
//! README says, with every default at its default. The quick start's own
//! configuration step (scripts/lib.sh `write_config`), `forgehand serve`
//! on it from a fresh directory taking a label to a pull request and a
//! review to a follow-up, `forgehand run` from a fresh directory with no
//! configuration and only the model's flags, and `doctor` and
//! `check-config` on the quick start's configuration. Nothing here sets
//! a path, a limit or a backend: a default that no test ran is how the
//! default configuration came to open pull requests that deleted whole
//! repositories (issue 24). What is asserted is what a person sees: the
//! files a pull request changes, the first line `run` prints.

use std::path::Path;
use std::process::Command;

use forgehand_tests::fake_forge::Kind;
use forgehand_tests::local_run::{files_on, repository};
use forgehand_tests::model_server::ModelServer;
use forgehand_tests::project::{good_script, review_script};
use forgehand_tests::story::{forgehand_binary, only, quick_start_config, Story};

async fn a_label_then_a_review_on_the_quick_starts_configuration(kind: Kind) {
    let mut script = good_script();
    script.extend(review_script());
    let story = Story::first_run(kind, script).await;
    story.label(1).await;
    let jobs = story.settled().await;
    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "succeeded", "{job:#}\n{}", story.log());
    let branch = "forgehand/1-fix-add";
    // What the pull request changes, as its reviewer sees it: the fix,
    // and nothing deleted.
    assert_eq!(story.changes_on(branch).await, ["M calc.sh"]);
    let status = story.status(1);
    assert!(status.starts_with("✅ Opened #2: "), "{status}");

    story.review_two_threads().await;
    let jobs = story.settled().await;
    let review = only(&jobs, "review");
    assert_eq!(review["state"], "succeeded", "{review:#}");
    assert_eq!(story.changes_on(branch).await, ["M calc.sh", "M test.sh"]);
    assert_eq!(
        story.log_of(branch).await,
        ["Address the review", "Fix add in calc.sh", "start"]
    );

    // The data is where the quick start put it, and nothing landed in the
    // directory serve was started in.
    let data = story.data_dir();
    for made in ["forgehand.db", "mirrors", "jobs/checkouts", "transcripts"] {
        assert!(data.join(made).exists(), "{made} in {}", data.display());
    }
    let left: Vec<_> = std::fs::read_dir(story.cwd()).unwrap().flatten().collect();
    assert!(
        left.is_empty(),
        "serve wrote into its working directory: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn github_a_label_then_a_review_on_the_quick_starts_configuration() {
    a_label_then_a_review_on_the_quick_starts_configuration(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gitea_a_label_then_a_review_on_the_quick_starts_configuration() {
    a_label_then_a_review_on_the_quick_starts_configuration(Kind::Gitea).await;
}

/// The README's `forgehand run` from a fresh directory, with no
/// configuration at all: only the model's flags (where the README says
/// to pass them for a model that is not Ollama's default).
#[tokio::test(flavor = "multi_thread")]
async fn run_with_no_configuration_from_a_fresh_directory() {
    assert!(
        !Path::new("/etc/forgehand/forgehand.toml").exists(),
        "this machine has /etc/forgehand/forgehand.toml (a quick start ran here): the run without any configuration cannot be tried on it; move the file away"
    );
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("myproject");
    repository(
        &repo,
        &[
            ("calc.sh", "add() {\n  echo $(($1 - $2))\n}\n".to_owned()),
            (
                "test.sh",
                ". ./calc.sh\n[ \"$(add 2 3)\" = 5 ] && echo ok || { echo FAIL; exit 1; }\n"
                    .to_owned(),
            ),
            ("README.md", "# myproject\n".to_owned()),
        ],
    );
    let home = dir.path().join("home");
    let server = ModelServer::start(good_script()).await.unwrap();
    let out = tokio::task::block_in_place(|| {
        Command::new(forgehand_binary())
            .args(["run", "--repo", "."])
            .args(["--task", "Fix add in calc.sh"])
            .args([
                "--provider",
                "openai",
                "--model",
                "scripted-model",
                "--base-url",
            ])
            .arg(server.url_for("openai"))
            .current_dir(&repo)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", &home)
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        stdout.lines().next().unwrap(),
        "untested: Fix add in calc.sh (no environment: the tests were not run — declare one in .forgehand.toml)"
    );
    // Issue 26: with it, what to declare.
    assert!(
        stdout.contains("a .forgehand.toml to start from:\n    [environment]\n"),
        "{stdout}"
    );
    assert!(
        stderr.contains("forgehand: no configuration file"),
        "{stderr}"
    );
    let branch = stdout
        .lines()
        .find_map(|l| l.strip_prefix("branch:     "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap();
    assert_eq!(files_on(&repo, branch), ["README.md", "calc.sh", "test.sh"]);
    let git = git2::Repository::open(&repo).unwrap();
    let tip = git
        .find_branch(branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .peel_to_tree()
        .unwrap();
    let calc = tip
        .get_path(Path::new("calc.sh"))
        .unwrap()
        .to_object(&git)
        .unwrap();
    assert_eq!(
        std::str::from_utf8(calc.as_blob().unwrap().content()).unwrap(),
        "add() {\n  echo $(($1 + $2))\n}\n"
    );
    // Its data is in the user's state directory; the repository is as it
    // was but for the new branch.
    let state = home.join(".local/state/forgehand");
    assert!(state.join("jobs/checkouts").is_dir(), "{}", state.display());
    assert!(state.join("transcripts").is_dir());
    let statuses = git.statuses(None).unwrap();
    assert!(statuses.is_empty(), "the repository's tree is untouched");
}

/// `check-config` and `doctor` on the configuration the quick start
/// wrote: valid, say which file they read, no secret shown, and doctor
/// does not fail someone who only wants `forgehand run` for the lack of
/// a forge.
#[tokio::test(flavor = "multi_thread")]
async fn check_config_and_doctor_on_the_quick_starts_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("etc/forgehand.toml");
    let data = dir.path().join("var/lib/forgehand");
    let written = quick_start_config(&config, &data, dir.path());
    assert!(
        written
            .said
            .contains(&format!("wrote {}", config.display())),
        "{}",
        written.said
    );
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&config).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    // Written once: a second run keeps it.
    let again = quick_start_config(&config, &data, dir.path());
    assert_eq!(again.api_token, written.api_token);

    let server = ModelServer::start(vec![]).await.unwrap();
    let fresh = dir.path().join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let forgehand = |args: &[&str]| {
        Command::new(forgehand_binary())
            .args(args)
            .current_dir(&fresh)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", dir.path())
            .env("FORGEHAND_CONFIG", &config)
            .env("FORGEHAND_MODEL__BASE_URL", server.url_for("openai"))
            .output()
            .unwrap()
    };
    let out = tokio::task::block_in_place(|| forgehand(&["check-config"]));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "configuration from {} ($FORGEHAND_CONFIG)",
            config.display()
        )),
        "{stderr}"
    );
    assert!(!stdout.contains(&written.api_token) && !stdout.contains(&written.webhook_secret));
    assert!(
        !stdout.contains("= \"\""),
        "an unset secret shows as set: {stdout}"
    );
    assert!(
        stdout.contains(&format!("data_dir = \"{}\"", data.display())),
        "{stdout}"
    );

    let out = tokio::task::block_in_place(|| forgehand(&["doctor"]));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stderr.contains("configuration from"), "{stderr}");
    assert!(stdout.contains("model              ok: "), "{stdout}");
    assert!(
        stdout.contains("registry           ok: "),
        "the registries the quick start allowed: {stdout}"
    );
    assert!(
        stdout.contains(
            "forge              note: a webhook secret is set but no forge credential yet"
        ),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}");
}

/// `forgehand run` on the quick start's configuration, on a Python
/// project whose environment comes from PyPI and Debian's archive: the
/// registries the quick start allowed, the CA bundle it found on this
/// host (`environment.ca_bundle`, when the host names one) and the
/// environments' cache where its data directory puts it, each at what
/// the quick start wrote and nothing else.
#[tokio::test(flavor = "multi_thread")]
async fn run_on_the_quick_starts_configuration_sets_up_a_python_environment() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("etc/forgehand.toml");
    let data = dir.path().join("var/lib/forgehand");
    let home = dir.path().join("home");
    quick_start_config(&config, &data, &home);
    let repo = dir.path().join("calc");
    repository(
        &repo,
        &[
            ("calc.py", "def add(a, b):\n    return a - b\n".to_owned()),
            (
                "test_calc.py",
                "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n".to_owned(),
            ),
            ("requirements.txt", "pytest\n".to_owned()),
        ],
    );
    let script = vec![
        forgehand_tests::model_server::Step::call(
            "edit_file",
            serde_json::json!({"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}),
        ),
        forgehand_tests::model_server::Step::finish("add adds.", "Fix add"),
    ];
    let server = ModelServer::start(script).await.unwrap();
    let out = tokio::task::block_in_place(|| {
        Command::new(forgehand_binary())
            .args(["run", "--task", "Fix add"])
            .args([
                "--provider",
                "openai",
                "--model",
                "scripted-model",
                "--base-url",
            ])
            .arg(server.url_for("openai"))
            .current_dir(&repo)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("HOME", &home)
            .env("FORGEHAND_CONFIG", &config)
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().next().unwrap(),
        "succeeded: Fix add (the host ran `\"$HOME/.venv/bin/python\" -m pytest`: passed)"
    );
    let kept = std::fs::read_dir(data.join("environments"))
        .unwrap()
        .count();
    assert!(kept >= 1, "the environment is kept in the data directory");
}
