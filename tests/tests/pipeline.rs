//! The job pipeline end to end, as `forgehand serve` runs it: a labeled
//! issue on the fake GitHub, the repository served over smart HTTP, the
//! scripted model, the namespace sandbox. A pull request appears; the
//! status comment ends with its link; a sender without write access gets
//! one polite reply; a failing model ends in a reason code, never in
//! "working".

use std::path::PathBuf;
use std::sync::Arc;

use forgehand_bot::config::Config;
use forgehand_bot::job::{Job, Task};
use forgehand_bot::queue::{JobContext, JobError};
use forgehand_bot::store::{ClaimedJob, SqliteStore};
use forgehand_forge::{ForgeKind, Repo};
use forgehand_tests::fake_forge::{FakeForge, Kind};
use forgehand_tests::model_server::{ModelServer, Step};
use forgehand_tests::project::{good_script, ServedProject, TOKEN};
use forgehand_tests::rootfs;
use forgehand_tests::story::steps;
use serde_json::json;

struct World {
    kind: Kind,
    dir: tempfile::TempDir,
    /// The fake forge: GitHub or Gitea.
    github: FakeForge,
    project: ServedProject,
    clone_url: String,
    model: ModelServer,
}

async fn world(script: Vec<Step>) -> World {
    world_on(Kind::GitHub, script).await
}

async fn world_on(kind: Kind, script: Vec<Step>) -> World {
    let dir = tempfile::tempdir().unwrap();
    let project = ServedProject::start(kind, dir.path()).await;
    let github = FakeForge::start(kind).await.unwrap();
    github.with(|s| {
        s.bot_token(kind, "acme/demo", TOKEN, "forgehand");
        s.permissions
            .insert(("acme/demo".into(), "maintainer".into()), "write".into());
        s.add_issue("acme/demo", "maintainer", "Fix add", "add() subtracts.");
    });
    github.set_git_dir("acme/demo", &dir.path().join("served/demo.git"));
    let model = ModelServer::start(script).await.unwrap();
    World {
        kind,
        dir,
        github,
        clone_url: project.clone_url.clone(),
        project,
        model,
    }
}

impl World {
    fn config(&self) -> Config {
        let d = self.dir.path();
        let forge = match self.kind {
            Kind::GitHub => [
                ("FORGEHAND_GITHUB__API_URL", self.github.base_url.clone()),
                ("FORGEHAND_GITHUB__TOKEN", TOKEN.into()),
            ],
            Kind::Gitea => [
                ("FORGEHAND_GITEA__BASE_URL", self.github.base_url.clone()),
                ("FORGEHAND_GITEA__TOKEN", TOKEN.into()),
            ],
        };
        let env = [
            ("FORGEHAND_MODEL__PROVIDER", "openai".into()),
            ("FORGEHAND_MODEL__BASE_URL", self.model.url_for("openai")),
            ("FORGEHAND_MODEL__NAME", "scripted-model".into()),
            ("FORGEHAND_MODEL__RETRY_BASE_MS", "20".into()),
            ("FORGEHAND_MODEL__MAX_RETRIES", "1".into()),
            ("FORGEHAND_SANDBOX__BACKEND", "namespace".into()),
            ("FORGEHAND_SANDBOX__ROOTFS", rootfs().display().to_string()),
            (
                "FORGEHAND_GIT__MIRROR_DIR",
                d.join("mirrors").display().to_string(),
            ),
            (
                "FORGEHAND_GIT__WORK_DIR",
                d.join("jobs").display().to_string(),
            ),
            (
                "FORGEHAND_AGENT__TRANSCRIPT_DIR",
                d.join("transcripts").display().to_string(),
            ),
        ];
        Config::load_from(
            Some(&self.write_empty_config()),
            forge
                .iter()
                .chain(&env)
                .map(|(k, v)| (k.to_string(), v.clone())),
        )
        .unwrap()
    }

    fn write_empty_config(&self) -> PathBuf {
        let path = self.dir.path().join("forgehand.toml");
        std::fs::write(&path, "").unwrap();
        path
    }

    fn labeled_by(&self, sender: &str) -> ClaimedJob {
        ClaimedJob {
            id: forgehand_types::JobId(1),
            run: 1,
            attempt: 1,
            max_attempts: 3,
            last_error: None,
            job: Job {
                forge: match self.kind {
                    Kind::GitHub => ForgeKind::Github,
                    Kind::Gitea => ForgeKind::Gitea,
                },
                repo: Repo {
                    owner: "acme".into(),
                    name: "demo".into(),
                    clone_url: Some(self.clone_url.clone()),
                    default_branch: Some("main".into()),
                    private: false,
                },
                target: 1,
                on_pull_request: false,
                requested_by: sender.into(),
                task: Task::Labeled {
                    label: "forgehand".into(),
                },
            },
        }
    }

    async fn run(&self, job: &ClaimedJob) -> Result<serde_json::Value, JobError> {
        let handler = forgehand_bot::service::job_runner(&self.config())
            .await
            .unwrap()
            .handler;
        let url = format!(
            "sqlite://{}",
            self.dir.path().join("forgehand.db").display()
        );
        let store = SqliteStore::connect(&url).await.unwrap();
        handler
            .run(job, JobContext::new(Arc::new(store)))
            .await
            .map(|result| result.to_value())
    }

    /// The file at `path` on `branch` of the served repository.
    async fn file_on(&self, branch: &str, path: &str) -> String {
        self.project
            .file_on(self.kind, self.dir.path(), branch, path)
            .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_labeled_issue_becomes_a_pull_request() {
    let w = world(good_script()).await;
    let result = w.run(&w.labeled_by("maintainer")).await.unwrap();
    assert_eq!(result["outcome"], "succeeded", "{result}");
    assert_eq!(result["pull_request"], 2);
    let steps = steps(&result);
    assert_eq!(
        steps,
        [
            "authorized",
            "working copy",
            "environment",
            "sandbox",
            "agent",
            "gate, commit and push",
            "pull request"
        ],
        "each step with its time: {result}"
    );
    let transcript = result["transcript"]
        .as_str()
        .expect("the transcript's path is on the job");
    assert!(std::fs::read_to_string(transcript)
        .unwrap()
        .contains("\"event\":\"tool\""));

    let (status, pr, reactions) = w.github.with(|s| {
        let status = s
            .comments
            .iter()
            .find(|c| c.user == "forgehand")
            .unwrap()
            .body
            .clone();
        let pr = s.issues.iter().find(|i| i.pull.is_some()).unwrap().clone();
        (status, pr, s.reactions.clone())
    });
    assert_eq!(
        status,
        "✅ Opened #2: https://github.invalid/acme/demo/pull/2\n\n- Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox\n\n<!-- forgehand:job:1 -->"
    );
    let checks: Vec<(String, String, String)> = w.github.with(|s| {
        s.statuses
            .iter()
            .map(|st| (st.2.clone(), st.3.clone(), st.4.clone()))
            .collect()
    });
    assert_eq!(
        checks,
        [(
            "success".to_owned(),
            "forgehand".to_owned(),
            "integrity and secret checks passed".to_owned()
        )],
        "the gate's verdict on the pushed commit"
    );
    assert_eq!(
        reactions,
        [(
            "acme/demo".into(),
            "issue:1".into(),
            "forgehand".into(),
            "eyes".into()
        )]
    );
    assert_eq!(pr.title, "Fix add in calc.sh");
    let (head, base) = pr.pull.clone().unwrap();
    assert_eq!(
        (head.as_str(), base.as_str()),
        ("forgehand/1-fix-add", "main")
    );
    assert!(
        pr.body
            .starts_with("`add` subtracted; now it adds, and `sh test.sh` passes.\n\nCloses #1\n"),
        "{}",
        pr.body
    );
    assert!(
        pr.body.contains("- `calc.sh`") && pr.body.contains("5 turns"),
        "{}",
        pr.body
    );
    assert!(
        pr.body.contains("namespace sandbox, shared kernel"),
        "{}",
        pr.body
    );
    assert_eq!(
        w.file_on(&head, "calc.sh").await,
        "add() {\n  echo $(($1 + $2))\n}\n"
    );
    assert_eq!(
        w.file_on("main", "calc.sh").await,
        "add() {\n  echo $(($1 - $2))\n}\n"
    );
    assert_eq!(w.github.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sender_without_write_access_gets_one_polite_reply() {
    let w = world(good_script()).await;
    let result = w.run(&w.labeled_by("drive-by")).await.unwrap();
    assert_eq!(result["reason"], "denied", "{result}");
    w.github.with(|s| {
        let replies: Vec<&str> = s
            .comments
            .iter()
            .filter(|c| c.user == "forgehand")
            .map(|c| c.body.as_str())
            .collect();
        assert_eq!(replies.len(), 1);
        assert!(
            replies[0].starts_with("@drive-by thanks for asking!"),
            "{}",
            replies[0]
        );
        assert!(s.reactions.is_empty() && s.issues.iter().all(|i| i.pull.is_none()));
    });
    assert!(w.model.requests().is_empty(), "the model was never asked");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_model_ends_with_a_reason_code_not_working() {
    let w = world(vec![]).await;
    w.model.then_always(Step::Fail {
        status: 500,
        retry_after: None,
    });
    let error = w.run(&w.labeled_by("maintainer")).await.unwrap_err();
    assert!(
        matches!(&error, JobError::Permanent(e) if e.starts_with("model_error:")),
        "{error:?}"
    );
    let status = w.github.with(|s| {
        s.comments
            .iter()
            .find(|c| c.user == "forgehand")
            .unwrap()
            .body
            .clone()
    });
    assert!(
        status.starts_with(
            "❌ Stopped: `model_error`. the model's API failed or answered what cannot be used"
        ) && !status.contains("127.0.0.1"),
        "{status}"
    );
    assert_eq!(w.github.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_labeled_gitea_issue_becomes_a_pull_request_too() {
    let w = world_on(Kind::Gitea, good_script()).await;
    let result = w.run(&w.labeled_by("maintainer")).await.unwrap();
    assert_eq!(result["outcome"], "succeeded", "{result}");
    let (status, pr) = w.github.with(|s| {
        let status = s
            .comments
            .iter()
            .find(|c| c.user == "forgehand")
            .unwrap()
            .body
            .clone();
        (
            status,
            s.issues.iter().find(|i| i.pull.is_some()).unwrap().clone(),
        )
    });
    assert_eq!(
        status,
        "✅ Opened #2: http://gitea.invalid/acme/demo/pulls/2\n\n- Tests: none run by Forgehand; the agent's `sh test.sh` exited 0 in its own sandbox\n\n<!-- forgehand:job:1 -->"
    );
    assert!(pr.body.contains("Closes #1"), "{}", pr.body);
    let (head, _) = pr.pull.unwrap();
    assert_eq!(
        w.file_on(&head, "calc.sh").await,
        "add() {\n  echo $(($1 + $2))\n}\n"
    );
    assert_eq!(w.github.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_review_on_the_bots_pull_request_is_answered_with_a_commit_and_replies() {
    // The first job opens the pull request.
    let mut script = good_script();
    script.extend([
        Step::call(
            "write_file",
            json!({"path": "README.md", "content": "Use `add` from calc.sh.\n"}),
        ),
        Step::finish("Added a README as asked.", "Add a README"),
    ]);
    let w = world(script).await;
    w.run(&w.labeled_by("maintainer")).await.unwrap();
    let (pr, head) = w.github.with(|s| {
        let pr = s.issues.iter().find(|i| i.pull.is_some()).unwrap().clone();
        (pr.number, pr.pull.unwrap().0)
    });
    let review_id = w.github.with(|s| {
        s.add_review(
            "acme/demo",
            pr,
            "maintainer",
            "CHANGES_REQUESTED",
            "Please document it.",
            &[("calc.sh", 2, "Add a README that says how to use add.")],
        )
    });
    let mut job = w.labeled_by("maintainer");
    job.id = forgehand_types::JobId(2);
    job.job.target = pr;
    job.job.on_pull_request = true;
    job.job.task = Task::Review {
        review_id: Some(review_id),
        state: forgehand_forge::ReviewState::ChangesRequested,
        body: "Please document it.".into(),
    };
    let result = w.run(&job).await.unwrap();
    assert_eq!(result["outcome"], "succeeded", "{result}");
    assert_eq!(
        w.file_on(&head, "README.md").await,
        "Use `add` from calc.sh.\n"
    );
    assert_eq!(
        w.file_on(&head, "calc.sh").await,
        "add() {\n  echo $(($1 + $2))\n}\n",
        "the follow-up commit sits on top of the first"
    );
    w.github.with(|s| {
        let reply = s.review_comments.last().unwrap();
        assert_eq!(reply.user, "forgehand");
        assert!(reply.body.starts_with("Done in "), "{}", reply.body);
        let statuses: Vec<&str> = s
            .comments
            .iter()
            .filter(|c| c.user == "forgehand" && c.issue == pr)
            .map(|c| c.body.as_str())
            .collect();
        assert_eq!(
            statuses,
            [format!(
                "✅ Updated #{pr}: https://github.invalid/acme/demo/pull/{pr}\n\n- Tests: nothing was run that tests the change\n\n<!-- forgehand:job:2 -->"
            )]
        );
        assert_eq!(
            s.issues.iter().filter(|i| i.pull.is_some()).count(),
            1,
            "no second pull request"
        );
    });
    // Job 1 asked five times (four turns and its review): job 2 begins at the sixth.
    let prompt = w.model.requests()[5].body.to_string();
    assert!(
        prompt.contains("review thread 1 on calc.sh:2"),
        "the threads are the task"
    );
    assert_eq!(w.github.violations(), Vec::<String>::new());
}
