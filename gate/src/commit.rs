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
    pub job: i64,
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
    let mut message = request.message.trim_end().to_owned();
    message.push_str("\n\n");
    if let Some((name, email)) = request.co_author {
        message.push_str(&format!("Co-authored-by: {name} <{email}>\n"));
    }
    message.push_str(&format!("Forgehand-Job: {}\n", request.job));
    let signature = Signature::now(&bot.name, &bot.email)?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        &message,
        &tree,
        &parents,
    )
    .map(Some)
}
