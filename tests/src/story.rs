//! A whole installation for story tests: the real `forgehand serve` binary
//! (so it can be killed with SIGKILL), a fake forge that sends it signed
//! webhooks as its state changes, the project served over smart HTTP, the
//! scripted model and the namespace sandbox. A test reads like what a
//! maintainer does: label an issue, review the pull request, comment.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fake_forge::state::FakeIssue;
use crate::fake_forge::{FakeForge, Kind};
use crate::model_server::{ModelServer, Step};
use crate::normalise::normalise;
use crate::project::{ServedProject, TOKEN};

pub const REPO: &str = "acme/demo";
/// Has write access to [`REPO`].
pub const MAINTAINER: &str = "maintainer";
/// Can read [`REPO`], not write.
pub const OUTSIDER: &str = "drive-by";
/// The bot's login (the token's user on the fake).
pub const BOT: &str = "forgehand";
/// How a job's status comment is marked (`<!-- forgehand:job:N -->`).
pub const STATUS_MARKER: &str = "<!-- forgehand:job:";
const WEBHOOK_SECRET: &str = "story-webhook-secret";
pub use crate::fake_forge::state::GITEA_SCOPES;
const API_TOKEN: &str = "story-operator-token";

pub struct Story {
    pub kind: Kind,
    /// Who the bot is on the forge: [`BOT`], or `forgehand[bot]` as an App.
    pub bot_login: String,
    pub forge: FakeForge,
    pub model: ModelServer,
    pub project: ServedProject,
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    forgehand: Option<Child>,
    base: String,
    client: reqwest::Client,
    /// The webhook secret and operator token: the story's own, or what
    /// the quick start wrote ([`Story::first_run`]).
    webhook_secret: String,
    api_token: String,
    /// Where `forgehand serve` runs: the story's directory, or a fresh
    /// one of its own.
    cwd: PathBuf,
}

impl Story {
    /// Everything started, with issue #1 ("Fix add") open on the forge.
    pub async fn start(kind: Kind, script: Vec<Step>) -> Story {
        Self::start_with(kind, script, &[]).await
    }

    /// Like [`Story::start`], with `FORGEHAND_*` settings of the test's own.
    pub async fn start_with(kind: Kind, script: Vec<Step>, env: &[(&str, &str)]) -> Story {
        Self::start_inner(kind, script, env, false).await
    }

    /// On GitHub, with Forgehand signed in as a GitHub App (app id 4242,
    /// installed on [`REPO`]) instead of with a token.
    pub async fn start_as_app(script: Vec<Step>) -> Story {
        Self::start_inner(Kind::GitHub, script, &[], true).await
    }

    /// Like [`Story::start_with`], but nothing is wired on the forge yet:
    /// no webhook (what `forgehand setup` is for). `server.public_url` is
    /// where Forgehand listens, and `github.web_url` the fake GitHub's
    /// pages. With `no_github_credential`, no GitHub token or webhook
    /// secret either: the App that `forgehand setup github` creates
    /// brings them.
    pub async fn start_unwired(
        kind: Kind,
        script: Vec<Step>,
        env: &[(&str, &str)],
        no_github_credential: bool,
    ) -> Story {
        let mut story = Self::build(kind, script, env, false).await;
        let base = story.base.clone();
        story
            .env
            .push(("FORGEHAND_SERVER__PUBLIC_URL".into(), base));
        if kind == Kind::GitHub && no_github_credential {
            story.env.retain(|(k, _)| {
                k != "FORGEHAND_GITHUB__TOKEN" && k != "FORGEHAND_GITHUB__WEBHOOK_SECRET"
            });
        }
        if kind == Kind::GitHub {
            let web = story.forge.base_url.clone();
            story.env.push(("FORGEHAND_GITHUB__WEB_URL".into(), web));
        }
        story.start_forgehand().await;
        story
    }

    async fn start_inner(kind: Kind, script: Vec<Step>, env: &[(&str, &str)], app: bool) -> Story {
        let mut story = Self::build(kind, script, env, app).await;
        story.start_forgehand().await;
        let hook = match kind {
            Kind::GitHub => "github",
            Kind::Gitea => "gitea",
        };
        story
            .forge
            .add_webhook(&format!("{}/webhooks/{hook}", story.base), WEBHOOK_SECRET);
        story
    }

    /// The installation a new user has: the quick start's configuration,
    /// written by the quick start's own step (`write_config` of
    /// scripts/lib.sh) with its data directory in the story's directory,
    /// and `forgehand serve` started on it from a fresh working
    /// directory. Only what the user adds afterwards is set beside it:
    /// the forge's address and token (as `forgehand setup` would be told
    /// them), the model server, and a free port. No path, no sandbox
    /// backend, no timing is set: each is the default.
    pub async fn first_run(kind: Kind, script: Vec<Step>) -> Story {
        let mut story = Self::build(kind, script, &[], false).await;
        let config = story.dir.path().join("etc/forgehand.toml");
        let data = story.dir.path().join("var/lib/forgehand");
        let written = quick_start_config(&config, &data, story.dir.path());
        story.webhook_secret = written.webhook_secret;
        story.api_token = written.api_token;
        let cwd = story.dir.path().join("fresh");
        std::fs::create_dir_all(&cwd).unwrap();
        story.cwd = cwd;
        let listen = story.base.trim_start_matches("http://").to_owned();
        let mut env = vec![
            ("FORGEHAND_CONFIG".to_owned(), config.display().to_string()),
            (
                "HOME".to_owned(),
                story.dir.path().join("home").display().to_string(),
            ),
            ("FORGEHAND_SERVER__LISTEN".to_owned(), listen),
            (
                "FORGEHAND_MODEL__BASE_URL".to_owned(),
                story.model.url_for("openai"),
            ),
            (
                "FORGEHAND_MODEL__NAME".to_owned(),
                "scripted-model".to_owned(),
            ),
        ];
        env.extend(match kind {
            Kind::GitHub => [
                (
                    "FORGEHAND_GITHUB__API_URL".to_owned(),
                    story.forge.base_url.clone(),
                ),
                ("FORGEHAND_GITHUB__TOKEN".to_owned(), TOKEN.to_owned()),
            ],
            Kind::Gitea => [
                (
                    "FORGEHAND_GITEA__BASE_URL".to_owned(),
                    story.forge.base_url.clone(),
                ),
                ("FORGEHAND_GITEA__TOKEN".to_owned(), TOKEN.to_owned()),
            ],
        });
        story.env = env;
        story.start_forgehand().await;
        let hook = match kind {
            Kind::GitHub => "github",
            Kind::Gitea => "gitea",
        };
        let secret = story.webhook_secret.clone();
        story
            .forge
            .add_webhook(&format!("{}/webhooks/{hook}", story.base), &secret);
        story
    }

    /// Where the quick start's configuration keeps the data.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("var/lib/forgehand")
    }

    /// The working directory `forgehand` runs in.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Everything but Forgehand started.
    async fn build(kind: Kind, script: Vec<Step>, env: &[(&str, &str)], app: bool) -> Story {
        let dir = tempfile::tempdir().unwrap();
        let project = ServedProject::start(kind, dir.path()).await;
        let forge = FakeForge::start(kind).await.unwrap();
        forge.with(|s| {
            // What a real installation has (an App gets its right by its
            // installation).
            s.bot_token(kind, REPO, TOKEN, BOT);
            s.permissions
                .insert((REPO.into(), MAINTAINER.into()), "write".into());
            s.permissions
                .insert((REPO.into(), OUTSIDER.into()), "read".into());
            s.add_issue(REPO, MAINTAINER, "Fix add", "add() subtracts.");
        });
        forge.set_clone_url(REPO, &project.clone_url);
        forge.set_git_dir(REPO, &dir.path().join("served/demo.git"));
        let model = ModelServer::start(script).await.unwrap();
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let bot_login = if app {
            let (private, public) = crate::github_app::key_pair(dir.path(), "app");
            let key_path = dir.path().join("app-private-key.pem");
            std::fs::write(&key_path, private).unwrap();
            forge.with(|s| {
                s.apps.push((4242, public));
                s.installations.insert(REPO.into(), 77);
                // The git server takes one password: the installation's token.
                s.installation_token = Some(TOKEN.into());
            });
            env.push(("FORGEHAND_GITHUB__APP_ID".into(), "4242".into()));
            env.push((
                "FORGEHAND_GITHUB__PRIVATE_KEY_PATH".into(),
                key_path.display().to_string(),
            ));
            crate::fake_forge::APP_BOT.to_owned()
        } else {
            BOT.to_owned()
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut env = settings(kind, dir.path(), &forge, &model, port, &env);
        if app {
            env.retain(|(k, _)| k != "FORGEHAND_GITHUB__TOKEN");
        }
        Story {
            kind,
            bot_login,
            env,
            forge,
            model,
            project,
            forgehand: None,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
            webhook_secret: WEBHOOK_SECRET.to_owned(),
            api_token: API_TOKEN.to_owned(),
            cwd: dir.path().to_owned(),
            dir,
        }
    }

    /// Where Forgehand listens: `http://127.0.0.1:<port>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The webhook secret the story configures for the forge.
    pub fn webhook_secret(&self) -> &str {
        &self.webhook_secret
    }

    /// The operator API's token.
    pub fn api_token(&self) -> &str {
        &self.api_token
    }

    /// `forgehand ARGS…` with serve's settings and working directory,
    /// run to its end.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        self.cli_command(args)
            .output()
            .expect("the forgehand binary runs")
    }

    /// `forgehand ARGS…` started with serve's settings, its stdout piped.
    pub fn spawn_cli(&self, args: &[&str]) -> Child {
        self.cli_command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the forgehand binary starts")
    }

    fn cli_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(forgehand_binary());
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::null());
        command
    }

    /// Starts `forgehand serve` and waits until it answers `/readyz`.
    pub async fn start_forgehand(&mut self) {
        assert!(self.forgehand.is_none(), "forgehand is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let child = Command::new(forgehand_binary())
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the forgehand binary starts");
        self.forgehand = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = self
                .client
                .get(format!("{}/readyz", self.base))
                .send()
                .await
            {
                if r.status() == 200 {
                    return;
                }
            }
            if let Some(status) = self.forgehand.as_mut().unwrap().try_wait().unwrap() {
                panic!("forgehand exited at start ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "forgehand was not ready within 60 s:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL: no shutdown, no cleanup, as when a machine dies.
    pub fn kill_forgehand(&mut self) {
        let mut child = self.forgehand.take().expect("forgehand is running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// What forgehand logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("forgehand.log")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A maintainer labels issue `number` with the bot's label.
    pub async fn label(&self, number: u64) {
        self.forge
            .label_issue(REPO, number, "forgehand", MAINTAINER);
        self.forge.settle().await;
    }

    /// `by` comments on issue or pull request `number`.
    pub async fn comment(&self, number: u64, by: &str, body: &str) -> u64 {
        let id = self.forge.comment(REPO, number, by, body);
        self.forge.settle().await;
        id
    }

    /// The maintainer submits a review of pull request `pr` with threads
    /// on `(path, line, text)`.
    pub async fn review(&self, pr: u64, state: &str, body: &str, threads: &[(&str, u64, &str)]) {
        self.forge
            .submit_review(REPO, pr, MAINTAINER, state, body, threads);
        self.forge.settle().await;
    }

    /// `GET path` on the operator API.
    pub async fn api(&self, path: &str) -> Value {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.api_token)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    /// Every job, oldest first.
    pub async fn jobs(&self) -> Vec<Value> {
        let mut jobs = self.api("/api/jobs?limit=500").await["jobs"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        jobs.reverse();
        jobs
    }

    /// Waits until every job has ended and the forge has delivered what
    /// those jobs caused; returns the jobs, oldest first.
    pub async fn settled(&self) -> Vec<Value> {
        self.wait_for("every job to end", Duration::from_secs(120), |jobs| {
            !jobs.is_empty()
                && jobs
                    .iter()
                    .all(|j| !matches!(j["state"].as_str(), Some("queued" | "running")))
        })
        .await;
        self.forge.settle().await;
        // A delivery the jobs caused (a comment) may have made a job.
        self.wait_for("every job to end", Duration::from_secs(120), |jobs| {
            jobs.iter()
                .all(|j| !matches!(j["state"].as_str(), Some("queued" | "running")))
        })
        .await
    }

    /// Polls the jobs until `done` holds of them.
    pub async fn wait_for(
        &self,
        what: &str,
        within: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let jobs = self.jobs().await;
            if done(&jobs) {
                return jobs;
            }
            assert!(
                Instant::now() < deadline,
                "waited {within:?} for {what}; jobs: {jobs:#?}\nforgehand's log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The bot's comments on `number`, oldest first.
    pub fn bot_comments(&self, number: u64) -> Vec<String> {
        self.forge.with(|s| {
            s.comments
                .iter()
                .filter(|c| c.repo == REPO && c.issue == number && c.user == self.bot_login)
                .map(|c| c.body.clone())
                .collect()
        })
    }

    /// The one status comment on `number`, without its hidden marker.
    pub fn status(&self, number: u64) -> String {
        let mut statuses = self.status_comments(number);
        assert_eq!(statuses.len(), 1, "one status comment: {statuses:#?}");
        statuses.remove(0)
    }

    /// The maintainer asks for changes on the bot's pull request #2 in
    /// two threads, on `calc.sh` line 1 and `test.sh` line 2: what
    /// [`crate::project::review_script`] answers.
    pub async fn review_two_threads(&self) {
        self.review(
            2,
            "REQUEST_CHANGES",
            "Nearly there.",
            &[
                ("calc.sh", 1, "Say what add does."),
                ("test.sh", 2, "Test 0 + 0 too."),
            ],
        )
        .await;
    }

    /// Waits (a minute at most) until the agent's [`held_command`]
    /// `needle` runs.
    pub async fn wait_for_held_command(&self, needle: &str) {
        wait_until(&format!("the agent's command {needle} to start"), || {
            !held_command_pids(needle).is_empty()
        })
        .await;
    }

    /// The bot's status comments on `number`, oldest first, each without
    /// its hidden marker.
    pub fn status_comments(&self, number: u64) -> Vec<String> {
        self.bot_comments(number)
            .into_iter()
            .filter(|c| c.contains(STATUS_MARKER))
            .map(|c| c.split(STATUS_MARKER).next().unwrap().trim_end().to_owned())
            .collect()
    }

    /// Everything the bot said on issue or pull request `number`, as a
    /// reader of the page saw it over time, for a snapshot: each of its
    /// comments, oldest first, in every form it took (a status comment's
    /// intermediate states, then its final one), whole (hidden marker
    /// and all), with what varies between runs normalised.
    pub fn said(&self, number: u64) -> String {
        let comments: Vec<Vec<String>> = self.forge.with(|s| {
            s.comments
                .iter()
                .filter(|c| c.repo == REPO && c.issue == number && c.user == self.bot_login)
                .map(|c| c.history.clone())
                .collect()
        });
        assert!(!comments.is_empty(), "the bot said nothing on #{number}");
        let mut out = String::new();
        for (i, history) in comments.iter().enumerate() {
            out.push_str(&format!("━━ comment {} ━━\n", i + 1));
            for (j, body) in history.iter().enumerate() {
                if j > 0 {
                    out.push_str("── edited ──\n");
                }
                out.push_str(body.trim_end());
                out.push('\n');
            }
        }
        normalise(&out)
    }

    /// Pull request `number` as its reader sees it, for a snapshot: by
    /// whom, from which branch, its title and its body, normalised.
    pub fn pull_request(&self, number: u64) -> String {
        let pr = self
            .pulls()
            .into_iter()
            .find(|p| p.number == number)
            .unwrap_or_else(|| panic!("no pull request #{number}"));
        let (head, base) = pr.pull.clone().unwrap();
        normalise(&format!(
            "#{} by {}, {head} → {base}\n# {}\n\n{}",
            pr.number,
            pr.user,
            pr.title,
            pr.body.trim_end()
        ))
    }

    /// The bot's review comments (its answers in review threads), by
    /// file and line, for a snapshot, normalised.
    pub fn review_replies(&self) -> String {
        let mut replies = self.forge.with(|s| {
            s.review_comments
                .iter()
                .filter(|c| c.user == self.bot_login)
                .map(|c| format!("{}:{}: {}", c.path, c.position, c.body))
                .collect::<Vec<_>>()
        });
        replies.sort();
        normalise(&replies.join("\n"))
    }

    /// The labels made through the API (by `forgehand setup`): name,
    /// colour and description, for a snapshot.
    pub fn labels(&self) -> String {
        let labels = self.forge.with(|s| {
            s.labels
                .iter()
                .map(|l| {
                    format!(
                        "{} #{}: {}",
                        l.name,
                        l.color.trim_start_matches('#'),
                        l.description
                    )
                })
                .collect::<Vec<_>>()
        });
        normalise(&labels.join("\n"))
    }

    /// What the bot set on commits (a commit status or a check run): its
    /// state, name and description, in order, normalised.
    pub fn commit_statuses(&self) -> String {
        let set = self.forge.with(|s| {
            s.statuses
                .iter()
                .map(|(_, _, state, context, description)| {
                    format!("{state} {context}: {description}")
                })
                .collect::<Vec<_>>()
        });
        normalise(&set.join("\n"))
    }

    /// The pull requests on the forge.
    pub fn pulls(&self) -> Vec<FakeIssue> {
        self.forge.with(|s| {
            s.issues
                .iter()
                .filter(|i| i.pull.is_some())
                .cloned()
                .collect()
        })
    }

    pub async fn branches(&self) -> Vec<String> {
        self.project.branches(self.kind, self.dir.path()).await
    }

    pub async fn file_on(&self, branch: &str, path: &str) -> String {
        self.project
            .file_on(self.kind, self.dir.path(), branch, path)
            .await
    }

    /// The commit `branch` points at in the served repository.
    pub fn tip(&self, branch: &str) -> String {
        let repo = git2::Repository::open_bare(self.dir.path().join("served/demo.git")).unwrap();
        let tip = repo
            .find_reference(&format!("refs/heads/{branch}"))
            .unwrap_or_else(|e| panic!("no branch {branch}: {e}"))
            .peel_to_commit()
            .unwrap()
            .id();
        tip.to_string()
    }

    /// The commits the forge holds statuses (or check runs) for, with
    /// their states, in the order they were set.
    pub fn statuses(&self) -> Vec<(String, String)> {
        self.forge.with(|s| {
            s.statuses
                .iter()
                .map(|(_, sha, state, _, _)| (sha.clone(), state.clone()))
                .collect()
        })
    }

    /// The files a pull request from `branch` onto `main` changes.
    pub async fn changes_on(&self, branch: &str) -> Vec<String> {
        self.project
            .changes(self.kind, self.dir.path(), "main", branch)
            .await
    }

    pub async fn log_of(&self, branch: &str) -> Vec<String> {
        self.project.log(self.kind, self.dir.path(), branch).await
    }

    /// Commits `files` (path, text) on `branch` of the served repository,
    /// straight into it, as someone pushing would.
    pub fn commit_on(&self, branch: &str, files: &[(&str, &str)], message: &str) {
        let repo = git2::Repository::open_bare(self.dir.path().join("served/demo.git")).unwrap();
        let reference = format!("refs/heads/{branch}");
        let parent = repo
            .find_reference(&reference)
            .unwrap()
            .peel_to_commit()
            .unwrap();
        let mut builder = git2::build::TreeUpdateBuilder::new();
        for (path, text) in files {
            let blob = repo.blob(text.as_bytes()).unwrap();
            builder.upsert(path, blob, git2::FileMode::Blob);
        }
        let tree = builder
            .create_updated(&repo, &parent.tree().unwrap())
            .unwrap();
        let tree = repo.find_tree(tree).unwrap();
        let sig = git2::Signature::now("Maintainer", "m@example.invalid").unwrap();
        repo.commit(Some(&reference), &sig, &sig, message, &tree, &[&parent])
            .unwrap();
    }

    pub async fn tip_message(&self, branch: &str) -> String {
        self.project
            .tip_message(self.kind, self.dir.path(), branch)
            .await
    }
}

impl Drop for Story {
    fn drop(&mut self) {
        if let Some(mut child) = self.forgehand.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- forgehand's log ---\n{}", self.log());
        }
        // For counting across a suite (bench/gate_friction.sh counts the
        // gate's holds on the agents' own output): every story's log,
        // kept where the variable says.
        if let Some(dir) = std::env::var_os("FORGEHAND_STORY_LOGS") {
            let dir = std::path::PathBuf::from(dir);
            static KEPT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let name = format!(
                "{}-{}-{}.log",
                std::thread::current()
                    .name()
                    .unwrap_or("story")
                    .replace("::", "-"),
                std::process::id(),
                KEPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            );
            if std::fs::create_dir_all(&dir).is_ok() {
                let _ = std::fs::write(dir.join(name), self.log());
            }
        }
    }
}

/// `forgehand serve`'s settings for the story, as environment.
fn settings(
    kind: Kind,
    dir: &Path,
    forge: &FakeForge,
    model: &ModelServer,
    port: u16,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let path = |p: &str| dir.join(p).display().to_string();
    let mut env: Vec<(String, String)> = match kind {
        Kind::GitHub => vec![
            ("FORGEHAND_GITHUB__API_URL".into(), forge.base_url.clone()),
            ("FORGEHAND_GITHUB__TOKEN".into(), TOKEN.into()),
            (
                "FORGEHAND_GITHUB__WEBHOOK_SECRET".into(),
                WEBHOOK_SECRET.into(),
            ),
        ],
        Kind::Gitea => vec![
            ("FORGEHAND_GITEA__BASE_URL".into(), forge.base_url.clone()),
            ("FORGEHAND_GITEA__TOKEN".into(), TOKEN.into()),
            (
                "FORGEHAND_GITEA__WEBHOOK_SECRET".into(),
                WEBHOOK_SECRET.into(),
            ),
        ],
    };
    let common = [
        ("FORGEHAND_SERVER__LISTEN", format!("127.0.0.1:{port}")),
        (
            "FORGEHAND_DATABASE__URL",
            format!("sqlite://{}", path("forgehand.db")),
        ),
        ("FORGEHAND_API__TOKEN", API_TOKEN.into()),
        ("FORGEHAND_BOT__USERNAME", BOT.into()),
        ("FORGEHAND_QUEUE__WORKERS", "2".into()),
        ("FORGEHAND_QUEUE__POLL_INTERVAL_MS", "50".into()),
        ("FORGEHAND_QUEUE__RETRY_BASE_SECS", "1".into()),
        ("FORGEHAND_MODEL__PROVIDER", "openai".into()),
        ("FORGEHAND_MODEL__BASE_URL", model.url_for("openai")),
        ("FORGEHAND_MODEL__NAME", "scripted-model".into()),
        ("FORGEHAND_MODEL__RETRY_BASE_MS", "20".into()),
        ("FORGEHAND_MODEL__MAX_RETRIES", "1".into()),
        ("FORGEHAND_SANDBOX__BACKEND", "namespace".into()),
        (
            "FORGEHAND_SANDBOX__ROOTFS",
            crate::rootfs().display().to_string(),
        ),
        ("FORGEHAND_GIT__MIRROR_DIR", path("mirrors")),
        ("FORGEHAND_GIT__WORK_DIR", path("jobs")),
        ("FORGEHAND_AGENT__TRANSCRIPT_DIR", path("transcripts")),
        ("FORGEHAND_LOG__LEVEL", "info".into()),
    ];
    env.extend(common.into_iter().map(|(k, v)| (k.to_owned(), v)));
    for (key, value) in extra {
        env.retain(|(k, _)| k != key);
        env.push((key.clone(), value.clone()));
    }
    env
}

/// The names of the steps a job's result records, in order.
pub fn steps(result: &Value) -> Vec<&str> {
    result["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps in {result:#}"))
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect()
}

/// Polls `done` every 25 ms until it holds; fails the test, saying what
/// it waited for, after a minute (a hang detector, not a timing).
pub async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "hung: waited 60 s for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The one job of `kind` among `jobs`.
pub fn only<'a>(jobs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = jobs.iter().filter(|j| j["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} job: {jobs:#?}");
    found[0]
}

/// `target/debug/forgehand`, beside the test binary's `deps/`.
pub fn forgehand_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("forgehand");
    assert!(
        bin.exists(),
        "no forgehand binary at {}: build it first (cargo build -p forgehand-bot; tests/run.sh does)",
        bin.display()
    );
    bin
}

/// Host processes whose command line contains `needle`: what a sandbox
/// leaves behind, seen from the host (the namespace sandbox shares the
/// kernel).
pub fn host_processes_with(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (pid != me && cmdline.contains(needle) && !cmdline.contains("cargo")).then_some(pid)
        })
        .collect()
}

/// The agent's command for work that lasts until the test is done with
/// it: `sleep <needle>` (the needle a number, so that
/// [`host_processes_with`] finds it), under a ten-minute `timeout` so
/// that a test that fails before ending it leaves nothing behind for
/// long. [`end_held_command`] ends it; `echo` then says so.
pub fn held_command(needle: &str) -> String {
    format!("timeout 600 sleep {needle}; echo {needle} ended")
}

/// The host processes that are the `sleep <needle>` of
/// [`held_command`]: the command is running once there is one.
pub fn held_command_pids(needle: &str) -> Vec<u32> {
    let argv = format!("sleep\0{needle}\0");
    host_processes_with(needle)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default() == argv.as_bytes()
        })
        .collect()
}

/// Ends the `sleep <needle>` of [`held_command`] (SIGKILL). Returns how
/// many processes there were.
pub fn end_held_command(needle: &str) -> usize {
    let pids = held_command_pids(needle);
    for pid in &pids {
        // Gone meanwhile (with its sandbox) is as good.
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
    pids.len()
}

/// What the quick start's configuration step wrote.
pub struct QuickStartConfig {
    pub webhook_secret: String,
    pub api_token: String,
    /// What it said.
    pub said: String,
}

/// Runs the quick start's configuration step (`write_config` in
/// scripts/lib.sh, as deploy/quickstart.sh calls it) for the forgehand
/// binary under test, writing `config` with its data in `data`; `home`
/// is the user's home. Returns the secrets it wrote.
pub fn quick_start_config(config: &Path, data: &Path, home: &Path) -> QuickStartConfig {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"repo="$1" && . "$repo/scripts/lib.sh" && write_config "$2" "$3" "$4""#)
        .arg("write_config")
        .arg(repo)
        .arg(forgehand_binary())
        .arg(config)
        .arg(data)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .output()
        .expect("bash runs");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "write_config failed: {said}");
    let text = std::fs::read_to_string(config).unwrap();
    let value = |section: &str, key: &str| -> String {
        let table: toml::Table = text.parse().unwrap();
        let item = &table[section][key];
        match item {
            toml::Value::Array(items) => items[0].as_str().unwrap().to_owned(),
            other => other.as_str().unwrap().to_owned(),
        }
    };
    QuickStartConfig {
        webhook_secret: value("github", "webhook_secret"),
        api_token: value("api", "token"),
        said,
    }
}
