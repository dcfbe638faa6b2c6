//! What a job asks for, read against its target's history: a retry runs
//! the last failed work again, `go` carries out the last plan.

use forgehand_forge::ReviewState;
use forgehand_types::JobId;

use crate::job::{Command, HeldCommit, HeldFor, JobOutcome, JobResult, Task};
use crate::store::{CancelCause, ClaimedJob, JobLedger, JobState, StoreResult, TargetJob};

use super::replies;
use super::status::Checklist;

/// Work for the pipeline.
pub(super) enum Order {
    Issue {
        plan: PlanStep,
    },
    Review {
        review_id: Option<u64>,
        state: ReviewState,
        body: String,
    },
    /// `@bot …` or `/forgehand fix …` on the bot's pull request.
    PullRequestRequest {
        text: String,
    },
}

/// What a maintainer allowed this once, beyond the operator's policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Allowed {
    /// `/forgehand allow-sensitive`: push sensitive files.
    pub sensitive: bool,
    /// `/forgehand allow-destructive`: push a change removing most of
    /// the repository.
    pub destructive: bool,
}

impl Allowed {
    /// What `command` allows (nothing, for a command that allows nothing).
    pub fn by(command: &Command) -> Self {
        Allowed {
            sensitive: matches!(command, Command::AllowSensitive),
            destructive: matches!(command, Command::AllowDestructive),
        }
    }

    /// Both allowances together.
    fn and(self, other: Allowed) -> Allowed {
        Allowed {
            sensitive: self.sensitive || other.sensitive,
            destructive: self.destructive || other.destructive,
        }
    }

    /// Whether it allows what `held` was held for.
    fn covers(self, held: HeldFor) -> bool {
        match held {
            HeldFor::Sensitive => self.sensitive,
            HeldFor::Destructive => self.destructive,
        }
    }

    /// The operator's `policy`, widened by what was allowed.
    pub fn widen(self, mut policy: forgehand_gate::GatePolicy) -> forgehand_gate::GatePolicy {
        policy.allow_sensitive |= self.sensitive;
        policy.allow_destructive |= self.destructive;
        policy
    }
}

/// A job, resolved.
pub(super) enum Resolved {
    Do(Assignment),
    /// Nothing to work on: one reply says why.
    Answer {
        reply: String,
        outcome: JobOutcome,
    },
}

/// The work a resolved job does.
pub(super) enum Assignment {
    Work {
        order: Order,
        allowed: Allowed,
    },
    /// Push the change the gate held for `order`'s job, as it was kept:
    /// everything it needs is allowed now.
    Release {
        order: Order,
        held: Box<HeldCommit>,
    },
}

impl Assignment {
    /// What the job's status comment lists while it runs.
    pub fn checklist(&self) -> Checklist {
        let opens_a_pull_request = |order: &Order| matches!(order, Order::Issue { .. });
        match self {
            Assignment::Work {
                order: Order::Issue {
                    plan: PlanStep::Propose,
                },
                ..
            } => Checklist::Plan,
            Assignment::Work { order, .. } if opens_a_pull_request(order) => Checklist::PullRequest,
            Assignment::Work { .. } => Checklist::FollowUp,
            Assignment::Release { order, .. } if opens_a_pull_request(order) => Checklist::Release,
            Assignment::Release { .. } => Checklist::ReleaseFollowUp,
        }
    }
}

/// How far back a target's history is read.
const HISTORY: u32 = 50;

pub(super) async fn resolve(claimed: &ClaimedJob, store: &dyn JobLedger) -> StoreResult<Resolved> {
    let job = &claimed.job;
    match &job.task {
        Task::Command {
            command: Command::Retry,
            ..
        } => retry(claimed, store, Allowed::default()).await,
        Task::Command {
            command: command @ (Command::AllowSensitive | Command::AllowDestructive),
            ..
        } => allow(claimed, store, Allowed::by(command)).await,
        Task::Command {
            command: Command::Go,
            ..
        } => go(claimed, store).await,
        task => Ok(match order_for(task, job.on_pull_request) {
            Some(order) => Resolved::Do(Assignment::Work {
                order,
                allowed: Allowed::default(),
            }),
            None => Resolved::Answer {
                reply: replies::unsupported(job),
                outcome: JobOutcome::Unsupported,
            },
        }),
    }
}

/// The work a task asks for, when it asks for work.
fn order_for(task: &Task, on_pull_request: bool) -> Option<Order> {
    let order = match (task, on_pull_request) {
        (Task::Labeled { .. } | Task::Assigned | Task::Request { .. }, false)
        | (
            Task::Command {
                command: Command::Fix { .. },
                ..
            },
            false,
        ) => Order::Issue {
            plan: PlanStep::None,
        },
        (
            Task::Command {
                command: Command::Plan { .. },
                ..
            },
            false,
        ) => Order::Issue {
            plan: PlanStep::Propose,
        },
        (Task::Request { text, .. }, true) => Order::PullRequestRequest { text: text.clone() },
        (
            Task::Command {
                command: Command::Fix { instructions },
                ..
            },
            true,
        ) => Order::PullRequestRequest {
            text: instructions.clone().unwrap_or_else(|| {
                "Address what the discussion on this pull request asks for.".into()
            }),
        },
        (
            Task::Review {
                review_id,
                state,
                body,
            },
            true,
        ) => Order::Review {
            review_id: *review_id,
            state: *state,
            body: body.clone(),
        },
        _ => return None,
    };
    Some(order)
}

/// Earlier work on the target, newest first: jobs whose task asks for work,
/// leaving out the ones a newer request superseded.
fn earlier_work(
    history: &[TargetJob],
    current: JobId,
) -> impl Iterator<Item = (&TargetJob, Order)> + '_ {
    history
        .iter()
        .filter(move |j| j.id != current)
        .filter(|j| j.cancel_cause != Some(CancelCause::Superseded))
        .filter_map(|j| order_for(&j.job.task, j.job.on_pull_request).map(|o| (j, o)))
}

async fn retry(
    claimed: &ClaimedJob,
    store: &dyn JobLedger,
    allowed: Allowed,
) -> StoreResult<Resolved> {
    let job = &claimed.job;
    let history = store.target_history(&job.target_key(), HISTORY).await?;
    let Some((last, order)) = earlier_work(&history, claimed.id).next() else {
        return Ok(Resolved::Answer {
            reply: replies::nothing_to_retry_yet(job),
            outcome: JobOutcome::NothingToRetry,
        });
    };
    match last.state {
        JobState::Failed | JobState::Dead | JobState::Cancelled => {
            Ok(Resolved::Do(Assignment::Work { order, allowed }))
        }
        state => Ok(Resolved::Answer {
            reply: replies::nothing_to_retry(job, last.id, state),
            outcome: JobOutcome::NothingToRetry,
        }),
    }
}

/// `allow-sensitive` or `allow-destructive`: the last work's held change
/// pushed as it was kept, once everything it was held for is allowed (by
/// this command and the ones answered since); the last failed work run
/// again with the allowance when nothing was kept.
async fn allow(
    claimed: &ClaimedJob,
    store: &dyn JobLedger,
    allowed: Allowed,
) -> StoreResult<Resolved> {
    let job = &claimed.job;
    let history = store.target_history(&job.target_key(), HISTORY).await?;
    let Some((last, order)) = earlier_work(&history, claimed.id).next() else {
        return Ok(Resolved::Answer {
            reply: replies::nothing_to_retry_yet(job),
            outcome: JobOutcome::NothingToRetry,
        });
    };
    if !matches!(
        last.state,
        JobState::Failed | JobState::Dead | JobState::Cancelled
    ) {
        return Ok(Resolved::Answer {
            reply: replies::nothing_to_retry(job, last.id, last.state),
            outcome: JobOutcome::NothingToRetry,
        });
    }
    let kept = last
        .result
        .as_ref()
        .and_then(JobResult::from_value)
        .and_then(|result| result.held);
    let Some(held) = kept else {
        return Ok(Resolved::Do(Assignment::Work { order, allowed }));
    };
    // What maintainers allowed since: commands answered as waiting for
    // another allowance (a denied sender's command never got that far).
    let given = history
        .iter()
        .filter(|j| j.id > last.id && j.id != claimed.id)
        .filter(|j| {
            j.result
                .as_ref()
                .and_then(JobResult::from_value)
                .is_some_and(|r| r.outcome == JobOutcome::AwaitingAllowance)
        })
        .filter_map(|j| match &j.job.task {
            Task::Command { command, .. } => Some(Allowed::by(command)),
            _ => None,
        })
        .fold(allowed, Allowed::and);
    let missing: Vec<HeldFor> = held
        .held_for
        .iter()
        .copied()
        .filter(|h| !given.covers(*h))
        .collect();
    if missing.is_empty() {
        return Ok(Resolved::Do(Assignment::Release {
            order,
            held: Box::new(held),
        }));
    }
    Ok(Resolved::Answer {
        reply: replies::also_needed(job, last.id, &held, &missing),
        outcome: JobOutcome::AwaitingAllowance,
    })
}

async fn go(claimed: &ClaimedJob, store: &dyn JobLedger) -> StoreResult<Resolved> {
    let job = &claimed.job;
    let history = store.target_history(&job.target_key(), HISTORY).await?;
    let plan = history
        .iter()
        .filter(|j| j.id != claimed.id)
        .find(|j| {
            matches!(
                j.job.task,
                Task::Command {
                    command: Command::Plan { .. },
                    ..
                }
            )
        })
        .filter(|j| j.state == JobState::Succeeded)
        .and_then(|j| JobResult::from_value(j.result.as_ref()?)?.plan);
    Ok(match plan {
        Some(plan) => Resolved::Do(Assignment::Work {
            order: Order::Issue {
                plan: PlanStep::Approved(plan),
            },
            allowed: Allowed::default(),
        }),
        None => Resolved::Answer {
            reply: replies::no_plan(job),
            outcome: JobOutcome::NoPlan,
        },
    })
}

/// Where an issue job stands with `/forgehand plan` and `go`.
pub(super) enum PlanStep {
    /// No plan asked for: do the work.
    None,
    /// `/forgehand plan`: propose, change nothing.
    Propose,
    /// `/forgehand go` after a plan: do the work the plan describes.
    Approved(String),
}
