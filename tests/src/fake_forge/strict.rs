//! What the real forges refuse, refused here too, before a route answers:
//! a write by a user without the right on the repository, a commit
//! status or check run for a commit the repository does not hold, a
//! pull request from or onto a branch that does not exist, a review
//! requested from someone who is not a collaborator, and (Gitea) a token
//! without scopes. A fake that takes what the forge refuses lets a bug
//! through that the forge would stop: the stories' bot had no right on
//! their repository and yet commented, opened pull requests and set
//! statuses (issue 24).
//!
//! The repository's commits and branches are read from its git
//! directory ([`ForgeState::git_dirs`]): the served repository in the
//! stories, a small one the API tests make.

use std::path::Path;

use axum::http::StatusCode;
use serde_json::Value;

use super::state::ForgeState;
use super::Kind;

/// A refusal: the status and the forge's message.
pub type Refused = (StatusCode, String);

/// How much a user may do on a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    Read,
    Write,
    Admin,
}

impl Level {
    fn of(name: &str) -> Level {
        match name {
            "admin" | "owner" => Level::Admin,
            "write" | "maintain" => Level::Write,
            "read" | "triage" => Level::Read,
            _ => Level::None,
        }
    }
}

/// What `user` may do on `repo`: its collaborator permission, or for a
/// GitHub App's installation token, write where the App is installed.
pub fn level(state: &ForgeState, repo: &str, user: &str) -> Level {
    if user == super::APP_BOT && state.installations.contains_key(repo) {
        return Level::Write;
    }
    state
        .permissions
        .get(&(repo.to_owned(), user.to_owned()))
        .map_or(Level::None, |p| Level::of(p))
}

/// The right a call needs on its repository, by its template (the full
/// path template as the API description names it); `None` for calls this
/// module does not judge (the App's own, set-up calls judged by
/// `setup.rs`, reads).
fn needed(method: &str, template: &str) -> Option<Level> {
    if method == "GET" || !template.starts_with("/repos/{owner}/{repo}/") {
        return None;
    }
    let rest = &template["/repos/{owner}/{repo}".len()..];
    // Hooks and labels are the set-up's, and judged there.
    if rest.starts_with("/hooks") || rest.starts_with("/labels") {
        return None;
    }
    // Anyone who can read the repository may comment and react.
    let commenting = (rest.starts_with("/issues/") && rest.ends_with("/comments"))
        || rest.ends_with("/reactions")
        || (rest.starts_with("/pulls/") && rest.ends_with("/comments"))
        || rest.contains("/replies");
    Some(if commenting {
        Level::Read
    } else {
        Level::Write
    })
}

/// One request, as the checks read it.
pub struct Call<'a> {
    pub kind: Kind,
    pub method: &'a str,
    /// The full path template (`/repos/{owner}/{repo}/pulls`).
    pub template: &'a str,
    pub repo: &'a str,
    pub user: &'a str,
    pub token: &'a str,
    pub args: &'a std::collections::HashMap<String, String>,
    pub body: &'a Value,
}

/// Whether `user` may make this call, and whether what it names exists.
pub fn check(state: &ForgeState, call: &Call<'_>) -> Result<(), Refused> {
    let Call {
        kind,
        method,
        template,
        repo,
        user,
        token,
        args,
        body,
    } = *call;
    if kind == Kind::Gitea && !state.token_scopes.contains_key(token) && !token.is_empty() {
        // Gitea 1.19 on: every token carries scopes; one without any
        // reaches nothing.
        return Err((
            StatusCode::FORBIDDEN,
            "token does not have at least one of required scope(s)".into(),
        ));
    }
    if let Some(needed) = needed(method, template) {
        let has = level(state, repo, user);
        if has < needed {
            return Err(match (kind, has) {
                // GitHub answers 404 to who cannot read, 403 to who cannot write.
                (Kind::GitHub, Level::None) => (StatusCode::NOT_FOUND, "Not Found".into()),
                (Kind::GitHub, _) => (
                    StatusCode::FORBIDDEN,
                    "Resource not accessible by integration".into(),
                ),
                (Kind::Gitea, _) => (
                    StatusCode::FORBIDDEN,
                    format!("user {user} does not have the right to {method} {template}"),
                ),
            });
        }
    }
    let rest = template
        .strip_prefix("/repos/{owner}/{repo}")
        .unwrap_or_default();
    match (method, rest) {
        ("POST", "/statuses/{sha}") => commit(state, repo, args.get("sha").map_or("", |s| s)),
        ("POST", "/check-runs") => commit(state, repo, body["head_sha"].as_str().unwrap_or("")),
        ("POST", "/pulls") => {
            for side in ["head", "base"] {
                let name = body[side].as_str().unwrap_or_default();
                // `owner:branch` names a branch of the owner's repository.
                let name = name.split_once(':').map_or(name, |(_, b)| b);
                branch(state, repo, name, side)?;
            }
            Ok(())
        }
        ("POST", "/pulls/{pull_number}/requested_reviewers")
        | ("POST", "/pulls/{index}/requested_reviewers") => {
            let reviewers = body["reviewers"].as_array().cloned().unwrap_or_default();
            for reviewer in reviewers {
                let login = reviewer.as_str().unwrap_or_default();
                if level(state, repo, login) < Level::Read {
                    return Err((
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!(
                            "Reviews may only be requested from collaborators: {login} is not one"
                        ),
                    ));
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// `sha` must be a commit of `repo`.
fn commit(state: &ForgeState, repo: &str, sha: &str) -> Result<(), Refused> {
    let git = open(state, repo)?;
    let found = git2::Oid::from_str(sha)
        .ok()
        .filter(|oid| sha.len() == 40 && git.find_commit(*oid).is_ok());
    found.map(drop).ok_or_else(|| {
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("No commit found for SHA: {sha}"),
        )
    })
}

/// `name` must be a branch of `repo`.
fn branch(state: &ForgeState, repo: &str, name: &str, side: &str) -> Result<(), Refused> {
    let git = open(state, repo)?;
    git.find_reference(&format!("refs/heads/{name}"))
        .map(drop)
        .map_err(|_| {
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("Validation Failed: {side} {name} is not a branch of {repo}"),
            )
        })
}

fn open(state: &ForgeState, repo: &str) -> Result<git2::Repository, Refused> {
    let dir = state.git_dirs.get(repo).ok_or_else(|| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the fake forge holds no git directory for {repo}: give it one (FakeForge::set_git_dir)"),
        )
    })?;
    git2::Repository::open_bare(dir).map_err(|e| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{}: {e}", dir.display()),
        )
    })
}

/// A bare repository at `dir` holding `branches`, each a commit of one
/// file: for tests that use the API without a served project. Returns
/// each branch's commit.
pub fn make_git(dir: &Path, branches: &[&str]) -> Vec<(String, String)> {
    let git = git2::Repository::init_bare(dir).unwrap();
    let sig = git2::Signature::now("Maintainer", "m@example.invalid").unwrap();
    let mut out = Vec::new();
    for (n, name) in branches.iter().enumerate() {
        let blob = git.blob(format!("{n}\n").as_bytes()).unwrap();
        let mut tree = git.treebuilder(None).unwrap();
        tree.insert("README.md", blob, 0o100644).unwrap();
        let tree = git.find_tree(tree.write().unwrap()).unwrap();
        let commit = git
            .commit(
                Some(&format!("refs/heads/{name}")),
                &sig,
                &sig,
                name,
                &tree,
                &[],
            )
            .unwrap();
        out.push(((*name).to_owned(), commit.to_string()));
    }
    out
}
