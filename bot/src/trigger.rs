//! Which events become jobs. Pure: an event and the bot's identity in, a
//! decision out, so every rule is tested without a server or a database.

use forgehand_forge::{
    Actor, CommentAction, Event, ForgeKind, Issue, IssueAction, PullRequest, Repo,
};

use crate::command::{self, Addressed};
use crate::job::{Job, Task};

/// Who the bot is on the forge, and the label that summons it.
#[derive(Debug, Clone)]
pub struct BotIdentity {
    pub username: String,
    pub label: String,
}

impl BotIdentity {
    /// True for the bot's own user. A GitHub App acts as `name[bot]`.
    pub fn is_me(&self, login: &str) -> bool {
        let login = login.strip_suffix("[bot]").unwrap_or(login);
        login.eq_ignore_ascii_case(&self.username)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Record the delivery and queue these jobs. `detail` says what made
    /// it interesting (the label, the command, the review state).
    Act { jobs: Vec<Job>, detail: String },
    /// Record the delivery, queue nothing. `detail` is what the event
    /// carried that a trigger could have matched (its label, assignee,
    /// review state), so operators can see why it did not.
    Ignore {
        reason: String,
        detail: Option<String>,
    },
}

fn ignore(reason: impl Into<String>) -> Decision {
    Decision::Ignore {
        reason: reason.into(),
        detail: None,
    }
}

pub fn decide(forge: ForgeKind, event: &Event, bot: &BotIdentity) -> Decision {
    match decide_inner(forge, event, bot) {
        Decision::Ignore { reason, .. } => Decision::Ignore {
            reason,
            detail: describe(event),
        },
        act => act,
    }
}

/// What a trigger looks at in an event, in the form details take.
fn describe(event: &Event) -> Option<String> {
    match event {
        Event::Issue {
            label: Some(label), ..
        } => Some(format!("label:{label}")),
        Event::Issue {
            assignee: Some(assignee),
            ..
        } => Some(format!("assignee:{}", assignee.login)),
        Event::ReviewSubmitted { state, .. } => Some(format!("review:{}", state.as_str())),
        _ => None,
    }
}

fn decide_inner(forge: ForgeKind, event: &Event, bot: &BotIdentity) -> Decision {
    if let Some(sender) = event.sender() {
        if bot.is_me(&sender.login) {
            return ignore("sent by the bot itself");
        }
    }
    match event {
        Event::Issue {
            action: IssueAction::Labeled,
            repo,
            sender,
            issue,
            label,
            ..
        } => on_labeled(forge, repo, sender, issue, label.as_deref(), bot),
        Event::Issue {
            action: IssueAction::Assigned,
            repo,
            sender,
            issue,
            assignee,
            ..
        } => {
            let to_me = match assignee {
                Some(a) => bot.is_me(&a.login),
                // Gitea does not say who was assigned: look at the set.
                None => issue.assignees.iter().any(|a| bot.is_me(a)),
            };
            if !to_me {
                return ignore("assigned to someone else");
            }
            if issue.is_pull_request {
                return ignore("a pull request was assigned; Forgehand works from issues");
            }
            let login = assignee
                .as_ref()
                .map_or(bot.username.as_str(), |a| a.login.as_str());
            let detail = format!("assignee:{login}");
            act(
                forge,
                repo,
                sender,
                issue.number,
                false,
                Task::Assigned,
                &detail,
            )
        }
        Event::IssueComment {
            action: CommentAction::Created,
            repo,
            sender,
            issue,
            comment,
        } => on_comment(
            forge,
            repo,
            sender,
            issue.number,
            issue.is_pull_request,
            comment.id,
            &comment.body,
            bot,
        ),
        Event::ReviewComment {
            action: CommentAction::Created,
            repo,
            sender,
            pull_request,
            comment,
            ..
        } => on_comment(
            forge,
            repo,
            sender,
            pull_request.number,
            true,
            comment.id,
            &comment.body,
            bot,
        ),
        Event::ReviewSubmitted {
            repo,
            sender,
            pull_request,
            review_id,
            state,
            body,
        } => on_review(
            forge,
            repo,
            sender,
            pull_request,
            *review_id,
            *state,
            body,
            bot,
        ),
        Event::IssueComment { .. } | Event::ReviewComment { .. } => {
            ignore("only new comments are read for commands")
        }
        other => ignore(format!("Forgehand does not act on {}", other.name())),
    }
}

fn on_labeled(
    forge: ForgeKind,
    repo: &Repo,
    sender: &Actor,
    issue: &Issue,
    label: Option<&str>,
    bot: &BotIdentity,
) -> Decision {
    let matches = |l: &str| l.eq_ignore_ascii_case(&bot.label);
    let hit = match label {
        Some(label) => matches(label),
        // Gitea reports only that the label set changed.
        None => issue.labels.iter().any(|l| matches(l)),
    };
    if !hit {
        return ignore(format!("not labeled `{}`", bot.label));
    }
    if issue.is_pull_request {
        return ignore("a pull request was labeled; Forgehand works from issues");
    }
    let task = Task::Labeled {
        label: bot.label.clone(),
    };
    act(
        forge,
        repo,
        sender,
        issue.number,
        false,
        task,
        &format!("label:{}", bot.label),
    )
}

#[allow(clippy::too_many_arguments)]
fn on_comment(
    forge: ForgeKind,
    repo: &Repo,
    sender: &Actor,
    number: u64,
    on_pull_request: bool,
    comment_id: u64,
    body: &str,
    bot: &BotIdentity,
) -> Decision {
    let commands = match command::parse_comment(body, &bot.username) {
        Ok(commands) => commands,
        Err(error) => {
            let task = Task::ExplainCommandError {
                message: error.to_string(),
                comment_id,
            };
            return act(
                forge,
                repo,
                sender,
                number,
                on_pull_request,
                task,
                "command:error",
            );
        }
    };
    // One comment is one request: the first command in it counts.
    let Some(first) = commands.into_iter().next() else {
        return ignore("the comment has no command and does not mention the bot");
    };
    let (task, detail) = match first {
        Addressed::Request { text } => (Task::Request { text, comment_id }, "mention".to_owned()),
        Addressed::Command(command) => {
            let detail = format!("command:{}", command.code());
            (
                Task::Command {
                    command,
                    comment_id,
                },
                detail,
            )
        }
    };
    act(forge, repo, sender, number, on_pull_request, task, &detail)
}

#[allow(clippy::too_many_arguments)]
fn on_review(
    forge: ForgeKind,
    repo: &Repo,
    sender: &Actor,
    pull_request: &PullRequest,
    review_id: Option<u64>,
    state: forgehand_forge::ReviewState,
    body: &str,
    bot: &BotIdentity,
) -> Decision {
    if !bot.is_me(&pull_request.author.login) {
        return ignore("a review of a pull request the bot did not open");
    }
    let task = Task::Review {
        review_id,
        state,
        body: body.to_owned(),
    };
    let detail = format!("review:{}", state.as_str());
    act(
        forge,
        repo,
        sender,
        pull_request.number,
        true,
        task,
        &detail,
    )
}

fn act(
    forge: ForgeKind,
    repo: &Repo,
    sender: &Actor,
    target: u64,
    on_pull_request: bool,
    task: Task,
    detail: &str,
) -> Decision {
    Decision::Act {
        jobs: vec![Job {
            forge,
            repo: repo.clone(),
            target,
            on_pull_request,
            requested_by: sender.login.clone(),
            task,
        }],
        detail: detail.to_owned(),
    }
}

#[cfg(test)]
mod tests;
