//! What a job works on: the issue (or a plan for it), a review on the
//! bot's pull request, or a request in a comment on it, turned into the
//! agent's task and the branch to work on.

use std::collections::HashMap;

use forgehand_forge::api::{ForgeApi, PullRequest, RepoRef, Review, ReviewComment};
use forgehand_forge::ReviewState;

use super::orders::{Order, PlanStep};
use super::run::JobRun;
use super::work::Work;
use super::{Failure, Pipeline};
use forgehand_agent::prompts::ForgeText;
use forgehand_types::reason::Reason;

/// Who may write to the repository, as the forge answers for each author
/// (asked once per author and job): the model is told each text's
/// author's real permission, never one assumed from where the text came.
struct Permissions<'a> {
    api: &'a dyn ForgeApi,
    repo: &'a RepoRef,
    known: HashMap<String, bool>,
}

impl<'a> Permissions<'a> {
    fn new(api: &'a dyn ForgeApi, repo: &'a RepoRef) -> Self {
        Permissions {
            api,
            repo,
            known: HashMap::new(),
        }
    }

    async fn can_write(&mut self, login: &str) -> Result<bool, Failure> {
        if let Some(known) = self.known.get(login) {
            return Ok(*known);
        }
        let (api, repo) = (self.api, self.repo);
        let can = api
            .permission(repo, login)
            .await
            .map_err(Failure::forge)?
            .can_write();
        self.known.insert(login.to_owned(), can);
        Ok(can)
    }
}

/// The review a Gitea webhook announced, which names no review id: the
/// most recent review on the pull request by the webhook's sender in the
/// announced state, preferring one whose body is the announced body.
/// Never someone else's review: its author is the job's sender.
pub(super) fn announced_review<'r>(
    reviews: &'r [Review],
    sender: &str,
    state: ReviewState,
    body: &str,
) -> Option<&'r Review> {
    let normalized = |text: &str| text.replace("\r\n", "\n").trim().to_owned();
    let body = normalized(body);
    let by_sender: Vec<&Review> = reviews
        .iter()
        .filter(|r| r.author.login == sender && r.state == Some(state))
        .collect();
    let same_body = by_sender
        .iter()
        .copied()
        .filter(|r| normalized(&r.body) == body)
        .max_by_key(|r| r.id);
    same_body.or_else(|| by_sender.iter().copied().max_by_key(|r| r.id))
}

/// The review a follow-up answers, as the webhook announced it.
struct AnnouncedReview<'a> {
    /// GitHub's review id; Gitea's webhook names none.
    pub id: Option<u64>,
    pub state: ReviewState,
    pub body: &'a str,
}

impl Pipeline {
    /// What the order asks the agent to do, on which branch.
    pub(super) async fn task(&self, run: &JobRun<'_>, order: &Order) -> Result<Work, Failure> {
        match order {
            Order::Issue { plan } => self.issue_work(run, plan).await,
            Order::Review {
                review_id,
                state,
                body,
            } => {
                let review = AnnouncedReview {
                    id: *review_id,
                    state: *state,
                    body,
                };
                self.review_work(run, &review).await
            }
            Order::PullRequestRequest { text } => self.pull_request_request_work(run, text).await,
        }
    }

    /// What an issue job works on: a new branch, the issue as its task.
    async fn issue_work(&self, run: &JobRun<'_>, plan: &PlanStep) -> Result<Work, Failure> {
        let (job, api, repo, prompts) = (run.job(), run.api, run.repo, &run.prompts);
        let issue = api.issue(repo, job.target).await.map_err(Failure::forge)?;
        let comments = api
            .comments(repo, job.target)
            .await
            .map_err(Failure::forge)?;
        let mut permissions = Permissions::new(api, repo);
        let issue_by_writer = permissions.can_write(&issue.author.login).await?;
        let mut writers = Vec::with_capacity(comments.len());
        for comment in &comments {
            writers.push(permissions.can_write(&comment.author.login).await?);
        }
        let wrapped_issue = prompts.wrap(&ForgeText {
            kind: "issue",
            author: &issue.author.login,
            can_write: issue_by_writer,
            text: &format!("{}\n\n{}", issue.title, issue.body),
        });
        let forge_comments: Vec<ForgeText<'_>> = comments
            .iter()
            .zip(&writers)
            .map(|(c, can_write)| ForgeText {
                kind: "comment",
                author: &c.author.login,
                can_write: *can_write,
                text: &c.body,
            })
            .collect();
        let mut comments = prompts.trusted_comments(&forge_comments);
        if let PlanStep::Approved(approved) = plan {
            comments.push_str("\n\nYou proposed this plan earlier and a maintainer approved it (`/forgehand go`); carry it out:\n\n");
            comments.push_str(approved);
        }
        let template = match plan {
            PlanStep::Propose => "plan.txt",
            _ => "new_issue.txt",
        };
        let prompt = prompts.render(
            template,
            &[
                ("number", &job.target.to_string()),
                ("repository", &repo.full_name()),
                ("issue", &wrapped_issue),
                ("comments", &comments),
            ],
        );
        Ok(Work {
            branch: self.config.git.branch_for(job.target, &issue.title),
            base: job
                .repo
                .default_branch
                .clone()
                .unwrap_or_else(|| "main".into()),
            prompt,
            follow_up: None,
            plan_only: matches!(plan, PlanStep::Propose),
            allowed: Default::default(),
        })
    }

    /// What a review follow-up works on: the pull request's own branch,
    /// the review and its threads as the task. Only the comments of the
    /// review that triggered the job are threads, each attributed to its
    /// author with their permission as the forge answers it.
    async fn review_work(
        &self,
        run: &JobRun<'_>,
        review: &AnnouncedReview<'_>,
    ) -> Result<Work, Failure> {
        let (job, api, repo, prompts) = (run.job(), run.api, run.repo, &run.prompts);
        let pr = self.own_pull_request(run).await?;
        let review_id = match review.id {
            Some(id) => Some(id),
            None => {
                let reviews = api
                    .reviews(repo, job.target)
                    .await
                    .map_err(Failure::forge)?;
                let found =
                    announced_review(&reviews, &job.requested_by, review.state, review.body)
                        .map(|r| r.id);
                if found.is_none() {
                    tracing::warn!(
                        pr = job.target,
                        "the announced review is not among the pull request's reviews: working without its threads"
                    );
                }
                found
            }
        };
        let threads: Vec<ReviewComment> = match review_id {
            Some(id) => api
                .review_threads(repo, job.target, id)
                .await
                .map_err(Failure::forge)?,
            None => Vec::new(),
        };
        let mut permissions = Permissions::new(api, repo);
        let mut text = prompts.wrap(&ForgeText {
            kind: "review",
            author: &job.requested_by,
            can_write: permissions.can_write(&job.requested_by).await?,
            text: review.body,
        });
        for (n, thread) in threads.iter().enumerate() {
            let place = match thread.line {
                Some(line) => format!("{}:{line}", thread.path),
                None => thread.path.clone(),
            };
            text.push_str("\n\n");
            text.push_str(&prompts.wrap(&ForgeText {
                kind: &format!("review thread {} on {place}", n + 1),
                author: &thread.author.login,
                can_write: permissions.can_write(&thread.author.login).await?,
                text: &thread.body,
            }));
        }
        let prompt = prompts.render(
            "review_follow_up.txt",
            &[
                ("number", &job.target.to_string()),
                ("repository", &repo.full_name()),
                ("branch", &pr.head_ref),
                ("review", &text),
            ],
        );
        Ok(Work {
            branch: pr.head_ref.clone(),
            base: pr.base_ref.clone(),
            prompt,
            follow_up: Some((pr, threads)),
            plan_only: false,
            allowed: Default::default(),
        })
    }

    /// A request in a comment on the bot's pull request: the agent works
    /// on the pull request's branch with the comment as its task.
    async fn pull_request_request_work(
        &self,
        run: &JobRun<'_>,
        request: &str,
    ) -> Result<Work, Failure> {
        let (job, api, repo, prompts) = (run.job(), run.api, run.repo, &run.prompts);
        let pr = self.own_pull_request(run).await?;
        let can_write = Permissions::new(api, repo)
            .can_write(&job.requested_by)
            .await?;
        let request = prompts.wrap(&ForgeText {
            kind: "comment",
            author: &job.requested_by,
            can_write,
            text: request,
        });
        let context = format!(
            "You opened this pull request on the branch {}; commit on it. Its title: {}",
            pr.head_ref, pr.title
        );
        let prompt = prompts.render(
            "comment_command.txt",
            &[
                ("target", &format!("pull request #{}", job.target)),
                ("repository", &repo.full_name()),
                ("request", &request),
                ("context", &context),
            ],
        );
        Ok(Work {
            branch: pr.head_ref.clone(),
            base: pr.base_ref.clone(),
            prompt,
            follow_up: Some((pr, Vec::new())),
            plan_only: false,
            allowed: Default::default(),
        })
    }

    /// The pull request a follow-up works on, which must be one of the
    /// bot's: a person's branch is never pushed to.
    async fn own_pull_request(&self, run: &JobRun<'_>) -> Result<PullRequest, Failure> {
        let pr = run
            .api
            .pull_request(run.repo, run.job().target)
            .await
            .map_err(Failure::forge)?;
        if !pr.head_ref.starts_with(self.config.git.branch_prefix()) {
            return Err(Failure::new(
                Reason::Denied,
                format!(
                    "{} is not a branch Forgehand owns; I only push to my own pull requests",
                    pr.head_ref
                ),
            ));
        }
        Ok(pr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(id: u64, author: &str, state: ReviewState, body: &str) -> Review {
        Review {
            id,
            author: forgehand_forge::Actor {
                login: author.into(),
                id: 1,
                is_bot: false,
            },
            state: Some(state),
            body: body.into(),
        }
    }

    #[test]
    fn the_announced_review_is_the_senders_latest_of_that_state_and_body() {
        use ReviewState as S;
        let reviews = [
            review(1, "maintainer", S::ChangesRequested, "Nearly there."),
            review(2, "drive-by", S::ChangesRequested, "Nearly there."),
            review(3, "maintainer", S::Commented, "Nearly there."),
            review(4, "maintainer", S::ChangesRequested, "Something else."),
            review(5, "drive-by", S::ChangesRequested, "Nearly there."),
        ];
        let found =
            |sender, state, body| announced_review(&reviews, sender, state, body).map(|r| r.id);
        assert_eq!(
            found(
                "maintainer",
                ReviewState::ChangesRequested,
                "Nearly there.\r\n"
            ),
            Some(1)
        );
        assert_eq!(
            found("maintainer", ReviewState::ChangesRequested, "Edited since."),
            Some(4),
            "no body matches: the sender's latest of that state"
        );
        assert_eq!(
            found("maintainer", ReviewState::Commented, "Nearly there."),
            Some(3)
        );
        assert_eq!(
            found("maintainer", ReviewState::Approved, "Nearly there."),
            None
        );
        assert_eq!(
            found("someone", ReviewState::ChangesRequested, "Nearly there."),
            None
        );
    }
}
