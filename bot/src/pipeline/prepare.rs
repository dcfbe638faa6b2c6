//! What a job works on: the issue (or a plan for it), a review on the
//! bot's pull request, or a request in a comment on it, turned into the
//! agent's task and the branch to work on.

use std::collections::HashMap;

use forgehand_forge::api::{ForgeApi, PullRequest, RepoRef, ReviewComment};

use super::retry::retrying;
use super::work::Work;
use super::{Failure, Pipeline};
use crate::agent::prompts::{trusted_comments, wrap, ForgeText, Prompts};
use crate::job::Job;

/// Where an issue job stands with `/forgehand plan` and `go`.
pub(super) enum PlanStep {
    /// No plan asked for: do the work.
    None,
    /// `/forgehand plan`: propose, change nothing.
    Propose,
    /// `/forgehand go` after a plan: do the work the plan describes.
    Approved(String),
}

impl Pipeline {
    /// What an issue job works on: a new branch, the issue as its task.
    pub(super) async fn issue_work(
        &self,
        job: &Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        plan: &PlanStep,
    ) -> Result<Work, Failure> {
        let issue = api.issue(repo, job.target).await.map_err(Failure::forge)?;
        let comments = api
            .comments(repo, job.target)
            .await
            .map_err(Failure::forge)?;
        let mut can_write: HashMap<String, bool> = HashMap::new();
        for login in std::iter::once(&issue.author).chain(comments.iter().map(|c| &c.author)) {
            if !can_write.contains_key(login) {
                let p = api.permission(repo, login).await.map_err(Failure::forge)?;
                can_write.insert(login.clone(), p.can_write());
            }
        }
        let prompts =
            Prompts::load(self.config.agent.prompts_dir.as_deref()).map_err(Failure::infra)?;
        let wrapped_issue = wrap(&ForgeText {
            kind: "issue",
            author: &issue.author,
            can_write: can_write.get(&issue.author).copied().unwrap_or(false),
            text: &format!("{}\n\n{}", issue.title, issue.body),
        });
        let forge_comments: Vec<ForgeText<'_>> = comments
            .iter()
            .map(|c| ForgeText {
                kind: "comment",
                author: &c.author,
                can_write: can_write.get(&c.author).copied().unwrap_or(false),
                text: &c.body,
            })
            .collect();
        let mut comments = trusted_comments(&forge_comments);
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
            allow_sensitive: false,
        })
    }

    /// What a review follow-up works on: the pull request's own branch,
    /// the review and its threads as the task.
    pub(super) async fn review_work(
        &self,
        job: &Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        review_id: Option<u64>,
        review_body: &str,
    ) -> Result<Work, Failure> {
        let pr = self.own_pull_request(job, api, repo).await?;
        let threads: Vec<ReviewComment> = api
            .review_comments(repo, job.target)
            .await
            .map_err(Failure::forge)?
            .into_iter()
            .filter(|c| review_id.is_none() || c.review_id == review_id)
            .collect();
        let mut review = wrap(&ForgeText {
            kind: "review",
            author: &job.requested_by,
            can_write: true,
            text: review_body,
        });
        for (n, thread) in threads.iter().enumerate() {
            let place = match thread.line {
                Some(line) => format!("{}:{line}", thread.path),
                None => thread.path.clone(),
            };
            review.push_str("\n\n");
            review.push_str(&wrap(&ForgeText {
                kind: &format!("review thread {} on {place}", n + 1),
                author: &thread.author,
                can_write: true,
                text: &thread.body,
            }));
        }
        let prompts =
            Prompts::load(self.config.agent.prompts_dir.as_deref()).map_err(Failure::infra)?;
        let prompt = prompts.render(
            "review_follow_up.txt",
            &[
                ("number", &job.target.to_string()),
                ("repository", &repo.full_name()),
                ("branch", &pr.head),
                ("review", &review),
            ],
        );
        Ok(Work {
            branch: pr.head.clone(),
            base: pr.base.clone(),
            prompt,
            follow_up: Some((pr, threads)),
            plan_only: false,
            allow_sensitive: false,
        })
    }

    /// A request in a comment on the bot's pull request: the agent works
    /// on the pull request's branch with the comment as its task.
    pub(super) async fn pull_request_request_work(
        &self,
        job: &Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        request: &str,
    ) -> Result<Work, Failure> {
        let pr = self.own_pull_request(job, api, repo).await?;
        let prompts =
            Prompts::load(self.config.agent.prompts_dir.as_deref()).map_err(Failure::infra)?;
        let request = wrap(&ForgeText {
            kind: "comment",
            author: &job.requested_by,
            can_write: true,
            text: request,
        });
        let context = format!(
            "You opened this pull request on the branch {}; commit on it. Its title: {}",
            pr.head, pr.title
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
            branch: pr.head.clone(),
            base: pr.base.clone(),
            prompt,
            follow_up: Some((pr, Vec::new())),
            plan_only: false,
            allow_sensitive: false,
        })
    }

    /// The pull request a follow-up works on, which must be one of the
    /// bot's: a person's branch is never pushed to.
    async fn own_pull_request(
        &self,
        job: &Job,
        api: &dyn ForgeApi,
        repo: &RepoRef,
    ) -> Result<PullRequest, Failure> {
        let pr = retrying(|| api.pull_request(repo, job.target))
            .await
            .map_err(Failure::forge)?;
        if !pr.head.starts_with(self.config.git.branch_prefix()) {
            return Err(Failure::new(
                "denied",
                format!(
                    "{} is not a branch Forgehand owns; I only push to my own pull requests",
                    pr.head
                ),
            ));
        }
        Ok(pr)
    }
}
