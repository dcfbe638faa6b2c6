//! `forgehand run --json` on a local repository, as the environment tests
//! drive it: a repository made in a temporary directory, the binary run
//! against the scripted model with the environment's cache and the jobs
//! in the test's own directory, and what the run left to look at.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::model_server::{ModelServer, Step};
use crate::rootfs;
use crate::story::forgehand_binary;

/// A repository with `files`, committed on `main`.
pub fn repository(dir: &Path, files: &[(&str, String)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (path, text) in files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, text).unwrap();
    }
    let git =
        git2::Repository::init_opts(dir, git2::RepositoryInitOptions::new().initial_head("main"))
            .unwrap();
    let mut index = git.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Dev", "dev@example.invalid").unwrap();
    git.commit(Some("HEAD"), &sig, &sig, "start", &tree, &[])
        .unwrap();
}

/// Runs of `forgehand run` sharing one directory: its configuration, the
/// environments' cache, the jobs and the transcripts (kept between runs).
pub struct LocalRuns {
    pub dir: PathBuf,
}

impl LocalRuns {
    /// `forgehand run --json` on `repo` with the namespace backend;
    /// `allow_hosts` is the egress's allow-list (comma-separated).
    pub fn run(&self, repo: &Path, server: &ModelServer, allow_hosts: &str, task: &str) -> Value {
        let config = self.dir.join("forgehand.toml");
        std::fs::write(&config, "[model]\nretry_base_ms = 50\nmax_retries = 1\n").unwrap();
        let out = Command::new("timeout")
            .arg("900")
            .arg(forgehand_binary())
            .args(["run", "--json", "--backend", "namespace", "--task", task])
            .arg("--config")
            .arg(&config)
            .arg("--repo")
            .arg(repo)
            .current_dir(&self.dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
            .env("FORGEHAND_MODEL__PROVIDER", "openai")
            .env("FORGEHAND_MODEL__BASE_URL", server.url_for("openai"))
            .env("FORGEHAND_MODEL__NAME", "scripted-model")
            .env("FORGEHAND_GIT__WORK_DIR", self.dir.join("jobs"))
            .env(
                "FORGEHAND_AGENT__TRANSCRIPT_DIR",
                self.dir.join("transcripts"),
            )
            .env("FORGEHAND_ENVIRONMENT__ALLOW_HOSTS", allow_hosts)
            .env(
                "FORGEHAND_ENVIRONMENT__CA_BUNDLE",
                "/etc/ssl/certs/ca-certificates.crt",
            )
            .env("FORGEHAND_ENVIRONMENT__CACHE_DIR", self.dir.join("envs"))
            .output()
            .expect("the forgehand binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "forgehand run --json printed no JSON ({e}):\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}

/// The paths on a branch of `repo`.
pub fn files_on(repo: &Path, branch: &str) -> Vec<String> {
    let git = git2::Repository::open(repo).unwrap();
    let tree = git
        .find_branch(branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .peel_to_tree()
        .unwrap();
    let mut paths = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        paths.push(format!("{dir}{}", entry.name().unwrap_or("")));
        git2::TreeWalkResult::Ok
    })
    .unwrap();
    paths
}

/// The scripted agent's call of its shell tool.
pub fn bash(command: &str) -> Step {
    Step::call("bash", json!({ "command": command }))
}

/// What each tool call answered, from the run's transcript.
pub fn tool_results(report: &Value) -> Vec<String> {
    let path = report["transcript"].as_str().expect("a transcript path");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "tool")
        .map(|e| e["result"].as_str().unwrap_or_default().to_owned())
        .collect()
}
