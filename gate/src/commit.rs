//! Committing the agent's work as the bot: every change in the working
//! tree (what git ignores left out), the person who asked credited, the
//! job named in a trailer. libgit2 runs no hooks, so nothing in the
//! working copy runs here.

use git2::{IndexAddOption, Oid, Repository, Signature};

pub struct BotIdentity {
    pub name: String,
    pub email: String,
}

pub struct CommitRequest<'a> {
    pub message: &'a str,
    /// The person who asked: `Co-authored-by: Name <email>`.
    pub co_author: Option<(&'a str, &'a str)>,
    /// Names the job in a `Forgehand-Job:` trailer.
    pub job: forgehand_types::JobId,
}

/// The tree a commit of the working tree would hold (what git ignores
/// left out), written to the object store; the index on disk is left as
/// it was. Read only after the gate cleared the tree: it reads every
/// file git does not ignore.
pub fn tree_to_commit(repo: &Repository) -> Result<Oid, git2::Error> {
    staged(repo)?.write_tree()
}

/// The index with every change in the working tree added, in memory.
fn staged(repo: &Repository) -> Result<git2::Index, git2::Error> {
    let mut index = repo.index()?;
    index.add_all(["*"], IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"], None)?;
    Ok(index)
}

/// Commits every change in the working tree on the current branch.
/// `None` when there is nothing to commit.
pub fn commit_all(
    repo: &Repository,
    bot: &BotIdentity,
    request: &CommitRequest<'_>,
) -> Result<Option<Oid>, git2::Error> {
    let mut index = staged(repo)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    if parent.as_ref().is_some_and(|p| p.tree_id() == tree.id()) {
        return Ok(None);
    }
    let signature = Signature::now(&bot.name, &bot.email)?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        &message(request),
        &tree,
        &parents,
    )
    .map(Some)
}

/// Where a held change's commit is kept in the working copy's
/// repository: a ref of its own, so that the branch, `HEAD` and the index
/// stay as they were (the gate's integrity check still holds) and nothing
/// pushes it by accident.
pub const HELD_REF: &str = "refs/forgehand/held";

/// Commits every change in the working tree as [`commit_all`] would, on
/// top of `HEAD`, but only at [`HELD_REF`]: the index on disk, `HEAD` and
/// the branch are left alone. `None` when there is nothing to commit.
pub fn commit_held(
    repo: &Repository,
    bot: &BotIdentity,
    request: &CommitRequest<'_>,
) -> Result<Option<Oid>, git2::Error> {
    let tree = repo.find_tree(tree_to_commit(repo)?)?;
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    if parent.as_ref().is_some_and(|p| p.tree_id() == tree.id()) {
        return Ok(None);
    }
    let signature = Signature::now(&bot.name, &bot.email)?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let oid = repo.commit(
        None,
        &signature,
        &signature,
        &message(request),
        &tree,
        &parents,
    )?;
    repo.reference(HELD_REF, oid, true, "held by the gate")?;
    Ok(Some(oid))
}

/// The commit's message: the agent's, then who asked and which job.
fn message(request: &CommitRequest<'_>) -> String {
    let mut message = request.message.trim_end().to_owned();
    message.push_str("\n\n");
    if let Some((name, email)) = request.co_author {
        message.push_str(&format!("Co-authored-by: {name} <{email}>\n"));
    }
    message.push_str(&format!("Forgehand-Job: {}\n", request.job));
    message
}
