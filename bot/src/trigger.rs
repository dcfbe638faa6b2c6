//! Which events become jobs, and which change what the bot remembers (a
//! GitHub App's installations). Pure: an event and the bot's identity in,
//! a decision out, so every rule is tested without a server or a
//! database.

use std::fmt;

use forgehand_forge::{
    Actor, CommentAction, Event, ForgeKind, InstallationAction, Issue, IssueAction, PullRequest,
    Repo,
};

use crate::command::{self, Addressed};
use crate::job::{Job, Task};
use crate::store::{InstallationChange, InstallationUpdate};

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
    /// Record the delivery and the change it makes to what a GitHub App
    /// can reach; queue nothing.
    Remember { installation: InstallationChange },
    /// Record the delivery, queue nothing. `detail` is what the event
    /// carried that a trigger could have matched (its label, assignee,
    /// review state), so operators can see why it did not.
    Ignore {
        reason: Ignored,
        detail: Option<String>,
    },
}

/// Why an event makes no job: shown to the forge in the answer and kept
/// with the delivery, as its `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ignored {
    FromTheBot,
    AssignedToSomeoneElse,
    PullRequestAssigned,
    /// The label that was added is not the bot's.
    NotTheLabel(String),
    PullRequestLabeled,
    /// An edited or deleted comment: commands are read once, when written.
    NotANewComment,
    NoCommand,
    ReviewOfAnotherPullRequest,
    /// An event the bot never acts on (`push`, `ping`, …).
    NotActedOn(String),
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ignored::FromTheBot => f.write_str("sent by the bot itself"),
            Ignored::AssignedToSomeoneElse => f.write_str("assigned to someone else"),
            Ignored::PullRequestAssigned => {
                f.write_str("a pull request was assigned; Forgehand works from issues")
            }
            Ignored::NotTheLabel(label) => write!(f, "not labeled `{label}`"),
            Ignored::PullRequestLabeled => {
                f.write_str("a pull request was labeled; Forgehand works from issues")
            }
            Ignored::NotANewComment => f.write_str("only new comments are read for commands"),
            Ignored::NoCommand => {
                f.write_str("the comment has no command and does not mention the bot")
            }
            Ignored::ReviewOfAnotherPullRequest => {
                f.write_str("a review of a pull request the bot did not open")
            }
            Ignored::NotActedOn(event) => write!(f, "Forgehand does not act on {event}"),
        }
    }
}

fn ignore(reason: Ignored) -> Decision {
    Decision::Ignore {
        reason,
        detail: None,
    }
}

pub fn decide(forge: ForgeKind, event: &Event, bot: &BotIdentity) -> Decision {
    if let Some(installation) = installation_change(event) {
        return Decision::Remember { installation };
    }
    match decide_inner(forge, event, bot) {
        Decision::Ignore { reason, .. } => Decision::Ignore {
            reason,
            detail: describe(event),
        },
        decided => decided,
    }
}

/// The change an App installation event makes to what the App can reach.
fn installation_change(event: &Event) -> Option<InstallationChange> {
    let (id, account, update) = match event {
        Event::Installation {
            action,
            installation_id,
            account,
            repositories,
            ..
        } => {
            let update = match action {
                InstallationAction::Created => InstallationUpdate::Installed {
                    repositories: repositories.clone(),
                },
                InstallationAction::Deleted => InstallationUpdate::Deleted,
                InstallationAction::Suspended => InstallationUpdate::Suspended,
                InstallationAction::Unsuspended => InstallationUpdate::Unsuspended,
                InstallationAction::NewPermissionsAccepted => return None,
            };
            (*installation_id, account, update)
        }
        // Both lists are applied whatever the action: an "added" event
        // lists nothing removed, and the other way round.
        Event::InstallationRepositories {
            installation_id,
            account,
            added,
            removed,
            ..
        } => (
            *installation_id,
            account,
            InstallationUpdate::Repositories {
                added: added.clone(),
                removed: removed.clone(),
            },
        ),
        _ => return None,
    };
    Some(InstallationChange {
        id,
        account: account.clone(),
        update,
    })
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
            return ignore(Ignored::FromTheBot);
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
                return ignore(Ignored::AssignedToSomeoneElse);
            }
            if issue.is_pull_request {
                return ignore(Ignored::PullRequestAssigned);
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
        Event::IssueComment { .. } | Event::ReviewComment { .. } => ignore(Ignored::NotANewComment),
        other => ignore(Ignored::NotActedOn(other.name())),
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
        return ignore(Ignored::NotTheLabel(bot.label.clone()));
    }
    if issue.is_pull_request {
        return ignore(Ignored::PullRequestLabeled);
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
        return ignore(Ignored::NoCommand);
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
        return ignore(Ignored::ReviewOfAnotherPullRequest);
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
