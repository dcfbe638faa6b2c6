//! The small project the pipeline and story tests work on — a shell
//! "library" whose `add` subtracts, and its test — pushed to `main` of a
//! bare repository served over smart HTTP, and the scripted model's side
//! of a good fix.

use std::path::Path;

use forgehand_forge::git::transport::{self, Credentials};
use secrecy::SecretString;
use serde_json::json;

use crate::fake_forge::Kind;
use crate::git_http::GitHttpServer;
use crate::model_server::Step;

/// The token the fake forge and the git server both take.
pub const TOKEN: &str = "ghp_pipelinefakefakefakefakefake012345";

/// The user name each forge's client gives git over HTTPS.
pub fn git_user(kind: Kind) -> &'static str {
    match kind {
        Kind::GitHub => "x-access-token",
        Kind::Gitea => "forgehand",
    }
}

pub fn credentials(kind: Kind) -> Credentials {
    Credentials::Token {
        username: git_user(kind).into(),
        token: SecretString::from(TOKEN),
    }
}

/// `acme/demo`, seeded, served from `dir/served/demo.git`.
pub struct ServedProject {
    pub git: GitHttpServer,
    pub clone_url: String,
}

impl ServedProject {
    pub async fn start(kind: Kind, dir: &Path) -> ServedProject {
        let served = dir.join("served");
        git2::Repository::init_opts(
            served.join("demo.git"),
            git2::RepositoryInitOptions::new()
                .bare(true)
                .initial_head("main"),
        )
        .unwrap();
        let git = GitHttpServer::start(&served, git_user(kind), TOKEN)
            .await
            .unwrap();
        let clone_url = format!("{}/demo.git", git.base_url);
        let (url, seed_dir) = (clone_url.clone(), dir.join("seed"));
        tokio::task::spawn_blocking(move || seed(kind, &url, &seed_dir))
            .await
            .unwrap();
        ServedProject { git, clone_url }
    }

    /// The file at `path` on `branch`, read through a fresh clone.
    pub async fn file_on(&self, kind: Kind, scratch: &Path, branch: &str, path: &str) -> String {
        let (branch, path) = (branch.to_owned(), path.to_owned());
        self.read(kind, scratch, move |repo| {
            let tree = repo
                .find_reference(&format!("refs/heads/{branch}"))
                .unwrap_or_else(|e| panic!("no branch {branch}: {e}"))
                .peel_to_tree()
                .unwrap();
            let blob = tree
                .get_path(Path::new(&path))
                .unwrap()
                .to_object(repo)
                .unwrap()
                .peel_to_blob()
                .unwrap();
            String::from_utf8(blob.content().to_vec()).unwrap()
        })
        .await
    }

    /// The branches on the server.
    pub async fn branches(&self, kind: Kind, scratch: &Path) -> Vec<String> {
        self.read(kind, scratch, |repo| {
            repo.references_glob("refs/heads/*")
                .unwrap()
                .filter_map(|r| Some(r.ok()?.shorthand()?.to_owned()))
                .collect()
        })
        .await
    }

    /// The commit messages' first lines on `branch`, newest first.
    pub async fn log(&self, kind: Kind, scratch: &Path, branch: &str) -> Vec<String> {
        let branch = branch.to_owned();
        self.read(kind, scratch, move |repo| {
            let mut walk = repo.revwalk().unwrap();
            walk.push_ref(&format!("refs/heads/{branch}")).unwrap();
            walk.map(|oid| {
                let commit = repo.find_commit(oid.unwrap()).unwrap();
                commit.summary().unwrap_or_default().to_owned()
            })
            .collect()
        })
        .await
    }

    /// What `to` changes against `from` (branches), as `git diff
    /// --name-status` shows it: `M calc.sh`, `D README.md`, … — the
    /// files a pull request from `to` onto `from` changes, as its
    /// reviewer sees them.
    pub async fn changes(&self, kind: Kind, scratch: &Path, from: &str, to: &str) -> Vec<String> {
        let (from, to) = (from.to_owned(), to.to_owned());
        self.read(kind, scratch, move |repo| {
            let tree = |name: &str| {
                repo.find_reference(&format!("refs/heads/{name}"))
                    .unwrap_or_else(|e| panic!("no branch {name}: {e}"))
                    .peel_to_tree()
                    .unwrap()
            };
            let (old, new) = (tree(&from), tree(&to));
            let diff = repo
                .diff_tree_to_tree(Some(&old), Some(&new), None)
                .unwrap();
            diff.deltas()
                .map(|d| {
                    let status = match d.status() {
                        git2::Delta::Added => "A",
                        git2::Delta::Deleted => "D",
                        git2::Delta::Modified => "M",
                        git2::Delta::Renamed => "R",
                        git2::Delta::Typechange => "T",
                        _ => "?",
                    };
                    let path = d.new_file().path().or(d.old_file().path()).unwrap();
                    format!("{status} {}", path.display())
                })
                .collect()
        })
        .await
    }

    /// The whole message of the branch's newest commit.
    pub async fn tip_message(&self, kind: Kind, scratch: &Path, branch: &str) -> String {
        let branch = branch.to_owned();
        self.read(kind, scratch, move |repo| {
            let tip = repo
                .find_reference(&format!("refs/heads/{branch}"))
                .unwrap()
                .peel_to_commit()
                .unwrap();
            tip.message().unwrap_or_default().to_owned()
        })
        .await
    }

    async fn read<T: Send + 'static>(
        &self,
        kind: Kind,
        scratch: &Path,
        f: impl FnOnce(&git2::Repository) -> T + Send + 'static,
    ) -> T {
        let (url, into) = (self.clone_url.clone(), scratch.join("check.git"));
        tokio::task::spawn_blocking(move || {
            let _ = std::fs::remove_dir_all(&into);
            let repo = transport::clone_bare(&into, &url, &credentials(kind)).unwrap();
            f(&repo)
        })
        .await
        .unwrap()
    }
}

/// Pushes the project to `main` of the served repository.
fn seed(kind: Kind, url: &str, dir: &Path) {
    push_files(
        dir,
        &[
            ("calc.sh", "add() {\n  echo $(($1 - $2))\n}\n"),
            (
                "test.sh",
                ". ./calc.sh\n[ \"$(add 2 3)\" = 5 ] && echo 'ok: add' || { echo FAIL; exit 1; }\n",
            ),
        ],
        "start",
        url,
        &credentials(kind),
    );
}

/// Commits `files` (path, text) in a new repository at `dir` as `main`
/// and pushes it to `url`.
pub fn push_files(
    dir: &Path,
    files: &[(&str, &str)],
    message: &str,
    url: &str,
    credentials: &Credentials,
) {
    let repo = git2::Repository::init(dir).unwrap();
    for (path, text) in files {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("Maintainer", "m@example.invalid").unwrap();
    repo.commit(Some("refs/heads/main"), &sig, &sig, message, &tree, &[])
        .unwrap();
    transport::push(
        &repo,
        url,
        &["refs/heads/main:refs/heads/main"],
        credentials,
    )
    .unwrap();
}

/// The model's side of a good fix: read, edit, test, finish.
pub fn good_script() -> Vec<Step> {
    vec![
        Step::call("read_file", json!({"path": "calc.sh"})),
        Step::call(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "$(($1 - $2))", "new_string": "$(($1 + $2))"}),
        ),
        Step::call("bash", json!({"command": "sh test.sh"})),
        Step::finish(
            "`add` subtracted; now it adds, and `sh test.sh` passes.",
            "Fix add in calc.sh",
        ),
    ]
}

/// The scripted model's side of answering a review of the good fix with
/// two threads (on `calc.sh` and `test.sh`): one commit, a note for the
/// first thread.
pub fn review_script() -> Vec<Step> {
    vec![
        Step::call(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "add() {", "new_string": "# add prints the sum of its arguments.\nadd() {"}),
        ),
        Step::call(
            "edit_file",
            json!({"path": "test.sh", "old_string": "[ \"$(add 2 3)\" = 5 ]", "new_string": "[ \"$(add 0 0)\" = 0 ] && [ \"$(add 2 3)\" = 5 ]"}),
        ),
        Step::call("bash", json!({"command": "sh test.sh"})),
        Step::call(
            "finish",
            json!({
                "summary": "Documented add; the test also checks 0 + 0.",
                "title": "Address the review",
                "replies": [
                    {"thread": 1, "changed": true, "note": "Added a comment above add."},
                    {"thread": 2, "changed": true, "note": ""}
                ]
            }),
        ),
    ]
}

/// The model's answer to a follow-up request on the good fix: one edit
/// (a comment above `add`), one commit titled "Document add".
pub fn document_add_script() -> [Step; 2] {
    [
        Step::call(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "add() {", "new_string": "# add prints the sum of its arguments.\nadd() {"}),
        ),
        Step::finish("Documented add.", "Document add"),
    ]
}
