use forgehand_forge::{IssueState, ReviewState};

use super::*;
use crate::job::{Command, Task};

fn bot() -> BotIdentity {
    BotIdentity {
        username: "forgehand".into(),
        label: "forgehand".into(),
    }
}

fn actor(login: &str) -> Actor {
    Actor {
        login: login.into(),
        id: 1,
        is_bot: false,
    }
}

fn repo() -> Repo {
    Repo {
        owner: "acme".into(),
        name: "widgets".into(),
        clone_url: None,
        default_branch: None,
        private: false,
    }
}

fn issue(number: u64, labels: &[&str], assignees: &[&str], is_pr: bool) -> Issue {
    Issue {
        number,
        title: "Crash on start".into(),
        body: String::new(),
        author: actor("reporter"),
        labels: labels.iter().map(|s| s.to_string()).collect(),
        assignees: assignees.iter().map(|s| s.to_string()).collect(),
        is_pull_request: is_pr,
        state: IssueState::Open,
    }
}

fn labeled(label: Option<&str>, labels: &[&str], sender: &str) -> Event {
    Event::Issue {
        action: IssueAction::Labeled,
        repo: repo(),
        sender: actor(sender),
        issue: issue(7, labels, &[], false),
        label: label.map(str::to_owned),
        assignee: None,
    }
}

fn comment(body: &str, sender: &str, on_pr: bool) -> Event {
    Event::IssueComment {
        action: CommentAction::Created,
        repo: repo(),
        sender: actor(sender),
        issue: issue(9, &[], &[], on_pr),
        comment: forgehand_forge::Comment {
            id: 55,
            body: body.into(),
            author: actor(sender),
        },
    }
}

fn review(pr_author: &str, reviewer: &str) -> Event {
    Event::ReviewSubmitted {
        repo: repo(),
        sender: actor(reviewer),
        pull_request: PullRequest {
            number: 12,
            url: "https://github.com/acme/widgets/pull/12".into(),
            title: "Fix crash".into(),
            body: String::new(),
            author: actor(pr_author),
            head_ref: "forgehand/7-crash".into(),
            head_sha: None,
            base_ref: "main".into(),
            merged: false,
            state: IssueState::Open,
        },
        review_id: Some(3),
        state: ReviewState::ChangesRequested,
        body: "Please add a test".into(),
    }
}

fn single_job(decision: Decision) -> (Job, String) {
    match decision {
        Decision::Act { mut jobs, detail } => {
            assert_eq!(jobs.len(), 1);
            (jobs.remove(0), detail)
        }
        other => panic!("expected a job: {other:?}"),
    }
}

fn ignored(decision: Decision) -> String {
    match decision {
        Decision::Ignore { reason, .. } => reason.to_string(),
        other => panic!("expected ignore: {other:?}"),
    }
}

#[test]
fn the_configured_label_queues_work_on_the_issue() {
    let (job, detail) = single_job(decide(
        ForgeKind::Github,
        &labeled(Some("ForgeHand"), &[], "maintainer"),
        &bot(),
    ));
    assert_eq!(
        job.task,
        Task::Labeled {
            label: "forgehand".into()
        }
    );
    assert_eq!(job.target, 7);
    assert_eq!(job.requested_by, "maintainer");
    assert_eq!(job.target_key().as_str(), "github:acme/widgets#7");
    assert_eq!(detail, "label:forgehand");
}

#[test]
fn another_label_is_ignored() {
    let reason = ignored(decide(
        ForgeKind::Github,
        &labeled(Some("bug"), &["forgehand"], "m"),
        &bot(),
    ));
    assert!(reason.contains("not labeled `forgehand`"), "{reason}");
}

#[test]
fn gitea_label_updates_are_read_from_the_label_set() {
    let (job, _) = single_job(decide(
        ForgeKind::Gitea,
        &labeled(None, &["bug", "forgehand"], "m"),
        &bot(),
    ));
    assert_eq!(job.forge, ForgeKind::Gitea);
    ignored(decide(
        ForgeKind::Gitea,
        &labeled(None, &["bug"], "m"),
        &bot(),
    ));
}

#[test]
fn assignment_to_the_bot_queues_work_and_to_others_does_not() {
    let assigned = |who: &str| Event::Issue {
        action: IssueAction::Assigned,
        repo: repo(),
        sender: actor("maintainer"),
        issue: issue(4, &[], &[who], false),
        label: None,
        assignee: Some(actor(who)),
    };
    let (job, _) = single_job(decide(ForgeKind::Github, &assigned("forgehand"), &bot()));
    assert_eq!(job.task, Task::Assigned);
    ignored(decide(ForgeKind::Github, &assigned("alice"), &bot()));
}

#[test]
fn a_mention_becomes_a_request_and_a_slash_command_a_command() {
    let (job, detail) = single_job(decide(
        ForgeKind::Github,
        &comment("@forgehand please add a --verbose flag", "m", false),
        &bot(),
    ));
    assert_eq!(
        job.task,
        Task::Request {
            text: "please add a --verbose flag".into(),
            comment_id: 55
        }
    );
    assert_eq!(detail, "mention");

    let (job, detail) = single_job(decide(
        ForgeKind::Github,
        &comment("/forgehand retry", "m", true),
        &bot(),
    ));
    assert_eq!(
        job.task,
        Task::Command {
            command: Command::Retry,
            comment_id: 55
        }
    );
    assert!(job.on_pull_request);
    assert_eq!(detail, "command:retry");
}

#[test]
fn a_comment_without_command_or_mention_is_ignored() {
    ignored(decide(
        ForgeKind::Github,
        &comment("LGTM, thanks!", "m", false),
        &bot(),
    ));
    ignored(decide(
        ForgeKind::Github,
        &comment("```\n/forgehand fix\n```", "m", false),
        &bot(),
    ));
}

#[test]
fn a_garbled_command_queues_an_explanation() {
    let (job, detail) = single_job(decide(
        ForgeKind::Github,
        &comment("/forgehand retyr", "m", false),
        &bot(),
    ));
    let Task::ExplainCommandError { message, .. } = job.task else {
        panic!("{:?}", job.task)
    };
    assert!(message.contains("retry"), "{message}");
    assert_eq!(detail, "command:error");
}

#[test]
fn the_bot_never_reacts_to_itself() {
    ignored(decide(
        ForgeKind::Github,
        &comment("/forgehand fix", "forgehand", false),
        &bot(),
    ));
    ignored(decide(
        ForgeKind::Github,
        &comment("/forgehand fix", "forgehand[bot]", false),
        &bot(),
    ));
    ignored(decide(
        ForgeKind::Github,
        &labeled(Some("forgehand"), &[], "forgehand[bot]"),
        &bot(),
    ));
    ignored(decide(
        ForgeKind::Github,
        &review("forgehand", "forgehand"),
        &bot(),
    ));
}

#[test]
fn reviews_count_only_on_the_bots_own_pull_requests() {
    let (job, detail) = single_job(decide(
        ForgeKind::Github,
        &review("forgehand[bot]", "maintainer"),
        &bot(),
    ));
    assert_eq!(job.target, 12);
    assert!(job.on_pull_request);
    assert_eq!(detail, "review:changes_requested");
    ignored(decide(
        ForgeKind::Github,
        &review("alice", "maintainer"),
        &bot(),
    ));
}

#[test]
fn edited_comments_and_unrelated_events_are_ignored() {
    let mut edited = comment("/forgehand fix", "m", false);
    if let Event::IssueComment { action, .. } = &mut edited {
        *action = CommentAction::Edited;
    }
    ignored(decide(ForgeKind::Github, &edited, &bot()));
    let reason = ignored(decide(
        ForgeKind::Github,
        &Event::Other {
            event: "push".into(),
            action: None,
        },
        &bot(),
    ));
    assert!(reason.contains("push"), "{reason}");
}

/// An App's installation events make no job but change what the App can
/// reach: the trigger says what to remember, whoever sent them.
#[test]
fn installation_events_are_remembered_not_acted_on() {
    use crate::store::{InstallationChange, InstallationUpdate};
    use forgehand_forge::{Actor, InstallationAction};
    let sender = Actor {
        login: "octo-owner".into(),
        id: 1,
        is_bot: false,
    };
    let installed = Event::Installation {
        action: InstallationAction::Created,
        installation_id: 42,
        account: "acme".into(),
        sender: sender.clone(),
        repositories: vec!["acme/widgets".into()],
    };
    assert_eq!(
        decide(ForgeKind::Github, &installed, &bot()),
        Decision::Remember {
            installation: InstallationChange {
                id: 42,
                account: "acme".into(),
                update: InstallationUpdate::Installed {
                    repositories: vec!["acme/widgets".into()]
                },
            }
        }
    );
    let suspended = Event::Installation {
        action: InstallationAction::Suspended,
        installation_id: 42,
        account: "acme".into(),
        sender: sender.clone(),
        repositories: Vec::new(),
    };
    assert!(matches!(
        decide(ForgeKind::Github, &suspended, &bot()),
        Decision::Remember { installation } if installation.update == InstallationUpdate::Suspended
    ));
    // Accepting new permissions changes nothing the bot keeps.
    let accepted = Event::Installation {
        action: InstallationAction::NewPermissionsAccepted,
        installation_id: 42,
        account: "acme".into(),
        sender,
        repositories: Vec::new(),
    };
    assert!(ignored(decide(ForgeKind::Github, &accepted, &bot())).contains("does not act"));
}
