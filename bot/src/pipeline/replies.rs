//! The one-line replies a job posts when it does no work: to someone who
//! may not command the bot, and to commands with nothing to act on. What
//! people read, kept together (and under snapshot tests in
//! `pipeline/texts.rs`).

use crate::job::{Command, Job, Task};
use crate::store::JobState;
use forgehand_agent::tools::ThreadReply;
use forgehand_types::JobId;

/// To someone without write access, once.
pub fn not_authorized(requester: &str) -> String {
    format!(
        "@{requester} thanks for asking! I only take requests from people with write access to this repository, so I will leave this one to a maintainer."
    )
}

/// `/forgehand stop` with nothing running or waiting.
pub fn nothing_to_stop(job: &Job) -> String {
    format!(
        "@{} there is nothing to stop: no job of mine is running or waiting on #{}.",
        job.requested_by, job.target
    )
}

/// `retry` or `allow-sensitive` on a target the bot never worked on.
pub fn nothing_to_retry_yet(job: &Job) -> String {
    format!(
        "@{} there is nothing to retry: I have not worked on #{} before.",
        job.requested_by, job.target
    )
}

/// `retry` or `allow-sensitive` when the last work did not fail: it
/// succeeded, or it is still running or waiting.
pub fn nothing_to_retry(job: &Job, last: JobId, state: JobState) -> String {
    let how = match state {
        JobState::Queued => "is still waiting",
        JobState::Running => "is still running",
        JobState::Succeeded => "succeeded",
        JobState::Failed | JobState::Dead => "failed",
        JobState::Cancelled => "was cancelled",
    };
    format!(
        "@{} there is nothing to retry: my last job on #{} (job {last}) {how}.",
        job.requested_by, job.target
    )
}

/// `go` without a plan.
pub fn no_plan(job: &Job) -> String {
    format!(
        "@{} there is no plan to go ahead with on #{}: ask `/forgehand plan` first.",
        job.requested_by, job.target
    )
}

/// A request with no work the bot does in it.
pub fn unsupported(job: &Job) -> String {
    let what = match &job.task {
        Task::Command {
            command: Command::Plan { .. },
            ..
        } => "`/forgehand plan` works on issues; on a pull request, ask for the change itself",
        _ if job.on_pull_request => "I did not find work in this request for a pull request",
        _ => "I did not find work in this request",
    };
    format!(
        "@{} {what}. `/forgehand help` lists what I understand.",
        job.requested_by
    )
}

/// An allowance given for a held change that needs another one too.
pub fn also_needed(
    job: &Job,
    held_by: JobId,
    held: &crate::job::HeldCommit,
    missing: &[crate::job::HeldFor],
) -> String {
    let commands: Vec<String> = missing
        .iter()
        .map(|m| format!("`/forgehand {}`", m.command()))
        .collect();
    let short = held.commit.short();
    format!(
        "@{} noted. The change job {held_by} kept (commit `{short}`) also needs {} before I push it.",
        job.requested_by,
        commands.join(" and ")
    )
}

/// The answer in review thread `n` (numbered from 1, as the task lists
/// them): "Done in <sha>." with the agent's note when it changed the code
/// for it, the agent's reason when it did not, and "Done in <sha>." when
/// the agent said nothing of that thread.
pub(super) fn thread_reply(replies: &[ThreadReply], n: usize, sha: &str) -> String {
    match replies.iter().find(|r| r.thread == n) {
        Some(r) if r.changed && r.note.trim().is_empty() => format!("Done in {sha}."),
        Some(r) if r.changed => format!("Done in {sha}: {}", r.note.trim()),
        Some(r) if r.note.trim().is_empty() => "No change for this one.".to_owned(),
        Some(r) => format!("No change: {}", r.note.trim()),
        None => format!("Done in {sha}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(thread: usize, changed: bool, note: &str) -> ThreadReply {
        ThreadReply {
            thread,
            changed,
            note: note.into(),
        }
    }

    #[test]
    fn each_thread_gets_the_agents_answer_or_done() {
        let replies = [
            reply(1, true, "Renamed it."),
            reply(2, false, "The name is used by the public API."),
            reply(3, true, " "),
            reply(5, false, ""),
        ];
        let sha = "0123456789";
        assert_eq!(
            thread_reply(&replies, 1, sha),
            "Done in 0123456789: Renamed it."
        );
        assert_eq!(
            thread_reply(&replies, 2, sha),
            "No change: The name is used by the public API."
        );
        assert_eq!(thread_reply(&replies, 3, sha), "Done in 0123456789.");
        assert_eq!(thread_reply(&replies, 4, sha), "Done in 0123456789.");
        assert_eq!(thread_reply(&replies, 5, sha), "No change for this one.");
    }
}
