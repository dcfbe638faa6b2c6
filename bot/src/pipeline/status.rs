//! The one status comment a job keeps up to date, and the pull request's
//! body: what a maintainer reads.

use forgehand_types::JobId;
use std::time::Duration;

use forgehand_forge::api::{ForgeApi, ForgeError, RepoRef};

use crate::trigger::BotIdentity;
use forgehand_gate::markdown;
use forgehand_jobcore::environment::{EnvironmentReport, TestResult, Testing};
use forgehand_jobcore::Stage;
use forgehand_model::Spend;
use forgehand_types::reason::Reason;

/// What a job's status comment lists: the stages this kind of job goes
/// through, and no other (a plan pushes nothing, a follow-up opens no
/// pull request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checklist {
    /// An issue worked on, to a new pull request.
    PullRequest,
    /// `/forgehand plan`: the agent proposes, nothing is committed.
    Plan,
    /// A follow-up on the bot's pull request: pushed to its branch.
    FollowUp,
    /// A held change released: the kept commit pushed, the agent not run.
    Release,
    /// A held follow-up released: pushed to the pull request's branch.
    ReleaseFollowUp,
}

impl Checklist {
    /// The stages listed, in order (the sandbox is part of the agent's
    /// line; replies and resumption are not steps of their own there).
    pub fn stages(self) -> &'static [Stage] {
        use Stage::*;
        match self {
            Checklist::PullRequest => &[
                Authorized,
                WorkingCopy,
                Environment,
                Agent,
                Tests,
                Publish,
                PullRequest,
            ],
            Checklist::Plan => &[Authorized, WorkingCopy, Environment, Agent],
            Checklist::FollowUp => &[Authorized, WorkingCopy, Environment, Agent, Tests, Publish],
            Checklist::Release => &[Authorized, Publish, PullRequest],
            Checklist::ReleaseFollowUp => &[Authorized, Publish],
        }
    }
}

/// The status comment while the job runs: each stage before `current`
/// ticked if `done` says it was done, and said to be passed by if not
/// (the tests, when none were run: a ticked box would claim they were).
pub fn working(checklist: Checklist, current: Stage, done: &dyn Fn(Stage) -> bool) -> String {
    let stages = checklist.stages();
    let mut out = String::from("🛠️ **Forgehand is working on this.**\n\n");
    let at = stages
        .iter()
        .position(|s| *s == current)
        .unwrap_or(stages.len());
    for (i, stage) in stages.iter().enumerate() {
        let name = stage.name();
        let line = match i.cmp(&at) {
            std::cmp::Ordering::Less if done(*stage) => format!("- [x] {name}"),
            std::cmp::Ordering::Less if *stage == Stage::Tests => format!("- [ ] {name}: none run"),
            std::cmp::Ordering::Less => format!("- [ ] {name}: skipped"),
            std::cmp::Ordering::Equal => format!("- [ ] {name} ← now"),
            std::cmp::Ordering::Greater => format!("- [ ] {name}"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Which attempt of a job this is, and how the one before it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the first.
    pub number: u32,
    pub of: u32,
    /// The error the attempt before ended with.
    pub after: Option<String>,
}

impl Attempt {
    pub fn first() -> Self {
        Attempt {
            number: 1,
            of: 1,
            after: None,
        }
    }

    /// The line under the checklist of a second or later attempt.
    fn note(&self) -> String {
        if self.number <= 1 {
            return String::new();
        }
        let after = match &self.after {
            Some(error) => format!(", after: {}", one_line(error, 200)),
            None => String::new(),
        };
        format!("\n_Attempt {} of {}{after}_\n", self.number, self.of)
    }

    /// Whether a later attempt follows this one if it fails retryably.
    pub fn has_next(&self) -> bool {
        self.number < self.of
    }
}

/// The status comment of attempt `attempt` while it runs.
pub fn working_on(
    checklist: Checklist,
    current: Stage,
    done: &dyn Fn(Stage) -> bool,
    attempt: &Attempt,
) -> String {
    working(checklist, current, done) + &attempt.note()
}

/// An attempt failed and another follows: not a final form, so it says
/// so instead of "Stopped".
pub fn retrying(attempt: &Attempt, reason: Reason, explanation: &str) -> String {
    let explanation = public(reason, explanation);
    format!(
        "🔁 **Attempt {} of {} failed**: `{reason}`. {}\n\nI will try again shortly (attempt {} of {}).\n",
        attempt.number,
        attempt.of,
        one_line(&explanation, 200),
        attempt.number + 1,
        attempt.of
    )
}

/// The first line of `text`, its control characters escaped, cut at
/// `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    markdown::cut(&markdown::one_line(first), max)
}

/// The final form when a pull request was opened or updated, with what
/// it was made in and how its tests came out.
pub fn done(
    pr_url: &str,
    pr_number: u64,
    updated: bool,
    environment: Option<&EnvironmentReport>,
    testing: Option<&Testing>,
) -> String {
    let verb = if updated { "Updated" } else { "Opened" };
    let draft = testing.is_some_and(|t| t.result == TestResult::Failed) && !updated;
    let what = if draft { " as a draft" } else { "" };
    let mut out = format!("✅ {verb} #{pr_number}{what}: {pr_url}\n");
    if let Some(env) = environment {
        out.push_str(&format!("\n- Environment: {}\n", environment_line(env)));
    }
    if let Some(testing) = testing {
        let tested = match (testing.result, testing.commands.last()) {
            (TestResult::Passed, Some(c)) => format!("{} passed", command(&c.command)),
            (TestResult::Failed, Some(c)) => format!(
                "{} failed (exit status {})",
                command(&c.command),
                c.exit_code
            ),
            (TestResult::None, Some(c)) => format!(
                "none run by Forgehand; the agent's {} exited {} in its own sandbox",
                command(&c.command),
                c.exit_code
            ),
            _ => "nothing was run that tests the change".to_owned(),
        };
        if environment.is_none() {
            out.push('\n');
        }
        out.push_str(&format!("- Tests: {tested}\n"));
    }
    out
}

/// A command as the status comment shows it: on one line, as code.
fn command(text: &str) -> String {
    markdown::code(&markdown::cut(&markdown::one_line(text), 100))
}

/// One line on an environment: where it came from, and whether it was
/// set up for this job.
fn environment_line(env: &EnvironmentReport) -> String {
    let how = match (env.setup.is_some() || !env.packages.is_empty(), env.reused) {
        (false, _) => "no setup".to_owned(),
        (true, true) => "reused, no setup run".to_owned(),
        (true, false) => format!("set up for this job in {:.0} s", env.setup_secs),
    };
    format!("{} ({how})", env.source)
}

/// At most this many lines of an environment's failure are shown: its
/// setup's output ends with what went wrong.
const ENVIRONMENT_LINES: usize = 30;

/// The final form of a failed job: its reason code and one line.
pub fn failed(reason: Reason, explanation: &str) -> String {
    if let Reason::Environment(_) = reason {
        // The repository's own text (its declaration, its setup's output):
        // shown as it is, in a block nothing in it can close.
        let lines: Vec<&str> = explanation.lines().collect();
        let shown = &lines[lines.len().saturating_sub(ENVIRONMENT_LINES)..];
        let cut = if shown.len() < lines.len() {
            format!("[… {} lines before …]\n", lines.len() - shown.len())
        } else {
            String::new()
        };
        return format!(
            "❌ Stopped: `{reason}`. The repository's environment could not be used:\n\n{}",
            markdown::fenced(&(cut + &shown.join("\n")))
        );
    }
    let explanation = public(reason, explanation);
    let mut lines = explanation.lines();
    let first = lines.next().unwrap_or_default();
    let mut out = format!("❌ Stopped: `{reason}`. {first}\n");
    // The gate's findings say what to look at (file and line, never a
    // secret's value); other reasons' details stay in the job's record.
    if reason.shows_findings() {
        let findings: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).take(20).collect();
        if !findings.is_empty() {
            out.push('\n');
            for line in findings {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// The final form of a job whose change the gate held: what it found,
/// the commit kept, and the commands that push exactly that commit.
pub fn held(reason: forgehand_gate::RefusalReason, held: &crate::job::HeldCommit) -> String {
    let mut out = format!(
        "✋ Held for a maintainer: `{}`. {}, so I did not push the change.\n",
        reason.code(),
        capitalized(reason.what())
    );
    let findings: Vec<&str> = held
        .findings
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(20)
        .collect();
    if !findings.is_empty() {
        out.push('\n');
        for line in findings {
            out.push_str(line);
            out.push('\n');
        }
    }
    let commands: Vec<String> = held
        .held_for
        .iter()
        .map(|h| format!("`/forgehand {}`", h.command()))
        .collect();
    let saying = match commands.as_slice() {
        [one] => one.clone(),
        many => format!("{} (each of them, in any order)", many.join(" and ")),
    };
    let short = held.commit.short();
    out.push_str(&format!(
        "\nThe change is kept as commit `{short}`, on no branch the forge sees. Saying \
         {saying} pushes exactly that commit and opens the pull request; the agent does not \
         run again. `/forgehand retry` runs the job anew instead.\n"
    ));
    out
}

/// What of a failure's explanation a comment on the forge shows. A model
/// error names the model server's address and quotes its answer (an
/// operator's internal host, a provider's error body): on a public issue
/// that is said in general, and the job's record keeps the whole.
fn public(reason: Reason, explanation: &str) -> String {
    match reason {
        Reason::ModelError => "the model's API failed or answered what cannot be used; the job's record (`GET /api/jobs/<id>`) and the log have its answer".to_owned(),
        _ => explanation.to_owned(),
    }
}

/// The final form of a job stopped on request.
pub fn stopped(reason: &str) -> String {
    // "stopped by @someone" is said once, not after "Stopped:".
    let reason = reason.trim().trim_end_matches('.');
    match reason.strip_prefix("stopped ") {
        Some(rest) => format!("⏹️ Stopped {rest} (`stopped`).\n"),
        None => format!("⏹️ Stopped (`stopped`): {reason}.\n"),
    }
}

/// The final form of `/forgehand plan`: the plan, and how to go ahead.
pub fn planned(plan: &str, bot: &str) -> String {
    format!(
        "📋 **Here is my plan.** Nothing is changed yet.\n\n{}\n\nSay `/forgehand go` (or `@{bot} go`) to carry it out, or comment to change it and ask `/forgehand plan` again.\n",
        plan.trim()
    )
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The hidden line that marks a job's status comment, so that a job run
/// again (a crash, a retry of the attempt) finds and edits its comment
/// instead of adding a second one.
pub fn marker(job: JobId) -> String {
    format!("<!-- forgehand:job:{job} -->")
}

/// The one status comment of a job on the forge.
pub struct StatusComment {
    pub id: u64,
    job: JobId,
    attempt: Attempt,
    checklist: Checklist,
    /// What the comment says now, as far as this attempt knows.
    shown: std::sync::Mutex<Option<String>>,
}

impl StatusComment {
    /// The job's status comment: the one an earlier attempt left, or a
    /// new one. Only a comment by the bot itself counts: anyone can write
    /// the marker of a job to come into a comment of theirs.
    pub async fn open(
        api: &dyn ForgeApi,
        repo: &RepoRef,
        target: u64,
        job: JobId,
        attempt: Attempt,
        checklist: Checklist,
        bot: &BotIdentity,
    ) -> Result<Self, ForgeError> {
        let mark = marker(job);
        // The job is authorized (it would not be opening its comment
        // otherwise): its next stage is the one under way.
        let next = checklist.stages()[1];
        let first = &working_on(checklist, next, &|s| s == Stage::Authorized, &attempt);
        match Self::earlier(api, repo, target, job, bot).await? {
            Some(comment) => {
                let status = StatusComment {
                    id: comment.id,
                    job,
                    attempt,
                    checklist,
                    shown: Default::default(),
                };
                status.set(api, repo, first).await?;
                Ok(status)
            }
            None => {
                let body = format!("{first}\n{mark}");
                let created = api.create_comment(repo, target, &body).await?;
                Ok(StatusComment {
                    id: created.id,
                    job,
                    attempt,
                    checklist,
                    shown: std::sync::Mutex::new(Some(body)),
                })
            }
        }
    }

    /// The job's status comment if an attempt made one (to give it its
    /// final form: its checklist is not shown again).
    pub async fn find(
        api: &dyn ForgeApi,
        repo: &RepoRef,
        target: u64,
        job: JobId,
        bot: &BotIdentity,
    ) -> Result<Option<Self>, ForgeError> {
        Ok(Self::earlier(api, repo, target, job, bot)
            .await?
            .map(|comment| StatusComment {
                id: comment.id,
                job,
                attempt: Attempt::first(),
                checklist: Checklist::PullRequest,
                shown: Default::default(),
            }))
    }

    async fn earlier(
        api: &dyn ForgeApi,
        repo: &RepoRef,
        target: u64,
        job: JobId,
        bot: &BotIdentity,
    ) -> Result<Option<forgehand_forge::api::Comment>, ForgeError> {
        let mark = marker(job);
        Ok(api
            .comments(repo, target)
            .await?
            .into_iter()
            .find(|c| bot.is_me(&c.author.login) && c.body.contains(&mark)))
    }

    /// The checklist at `current`, the stages before it as `done` says.
    pub async fn progress(
        &self,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        current: Stage,
        done: &(dyn Fn(Stage) -> bool + Sync),
    ) -> Result<(), ForgeError> {
        let text = working_on(self.checklist, current, done, &self.attempt);
        self.set(api, repo, &text).await
    }

    pub fn attempt(&self) -> &Attempt {
        &self.attempt
    }

    /// The comment's text, the marker added. The same text again is not
    /// sent: an edit that changes nothing still costs a request against
    /// the forge's rate limit.
    pub async fn set(
        &self,
        api: &dyn ForgeApi,
        repo: &RepoRef,
        text: &str,
    ) -> Result<(), ForgeError> {
        let body = format!("{text}\n{}", marker(self.job));
        if self.shown.lock().unwrap().as_deref() == Some(body.as_str()) {
            return Ok(());
        }
        api.edit_comment(repo, self.id, &body).await?;
        *self.shown.lock().unwrap() = Some(body);
        Ok(())
    }
}

pub struct PullRequestBody<'a> {
    pub summary: &'a str,
    /// `Closes #N`.
    pub closes: u64,
    pub files: &'a [String],
    pub findings: &'a str,
    /// Special files the gate removed instead of committing (a Markdown
    /// list).
    pub left_out: &'a str,
    pub isolation: &'a str,
    /// What the agent used and cost; none when no agent ran (a change
    /// released or resumed).
    pub spend: Option<Spend>,
    pub turns: u32,
    pub duration: Duration,
    /// What the host saw tested (none for a resumed job).
    pub testing: Option<&'a Testing>,
    pub environment: Option<&'a EnvironmentReport>,
    /// Files the change edits that define the environment.
    pub drift: &'a [String],
}

pub fn pull_request_body(b: &PullRequestBody<'_>) -> String {
    let mut out = format!("{}\n\nCloses #{}\n", b.summary.trim(), b.closes);
    if !b.files.is_empty() {
        out.push_str("\n**Files changed**\n\n");
        for file in b.files {
            out.push_str(&format!("- {}\n", markdown::code(file)));
        }
    }
    if !b.findings.is_empty() {
        out.push_str("\n**Needs a careful look** (sensitive files, pushed because allowed)\n\n");
        out.push_str(b.findings);
    }
    if !b.left_out.is_empty() {
        out.push_str("\n**Left out** (pipes, sockets or devices: git cannot hold them)\n\n");
        out.push_str(b.left_out);
    }
    if let Some(testing) = b.testing {
        out.push_str("\n**Testing** (what Forgehand saw run, not what the agent says)\n\n");
        if let Some(env) = b.environment {
            out.push_str(&format!("Environment: {}.\n\n", environment_line(env)));
        }
        if !b.drift.is_empty() {
            let files: Vec<String> = b.drift.iter().map(|f| markdown::code(f)).collect();
            out.push_str(&format!(
                "This change edits {}, which define{} the repository's environment: the tests ran in the environment of the base branch, not one built from this change.\n\n",
                files.join(", "),
                if files.len() == 1 { "s" } else { "" }
            ));
        }
        out.push_str(&testing.to_markdown());
    }
    let spent = b
        .spend
        .map(|s| format!("{} turns · {} · ", b.turns, spend_line(&s)))
        .unwrap_or_default();
    out.push_str(&format!(
        "\n---\n<sub>Forgehand · {} · {spent}{} s</sub>\n",
        b.isolation,
        b.duration.as_secs()
    ));
    out
}

/// Tokens as billed and dollars: "12,400 tokens in (9,000 cached, 1,200
/// written to the cache) · 800 out · $0.0123", or "unpriced" for a model
/// with no price.
pub fn spend_line(spend: &Spend) -> String {
    let u = spend.usage;
    let mut cached = Vec::new();
    if u.cache_read_tokens > 0 {
        cached.push(format!("{} cached", thousands(u.cache_read_tokens)));
    }
    if u.cache_write_tokens > 0 {
        cached.push(format!(
            "{} written to the cache",
            thousands(u.cache_write_tokens)
        ));
    }
    let cached = if cached.is_empty() {
        String::new()
    } else {
        format!(" ({})", cached.join(", "))
    };
    let cost = match spend.cost_usd {
        Some(dollars) => format!("${dollars:.4}"),
        None => "unpriced".to_owned(),
    };
    format!(
        "{} tokens in{cached} · {} out · {cost}",
        thousands(u.prompt_tokens()),
        thousands(u.output_tokens)
    )
}

/// 1234567 as "1,234,567".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_comment_reads_as_a_checklist_and_ends_in_one_line() {
        let before_agent = |s: Stage| s != Stage::Agent && s != Stage::Tests;
        assert_eq!(
            working(Checklist::PullRequest, Stage::Agent, &before_agent),
            "🛠️ **Forgehand is working on this.**\n\n- [x] authorized\n- [x] working copy\n- [x] environment\n- [ ] agent ← now\n- [ ] tests\n- [ ] gate, commit and push\n- [ ] pull request\n"
        );
        assert_eq!(
            failed(
                Reason::Budget(forgehand_types::reason::Budget::Turns),
                "the agent used all its turns\nmore"
            ),
            "❌ Stopped: `budget:turns`. the agent used all its turns\n"
        );
        assert_eq!(
            failed(
                Reason::Gate(forgehand_gate::RefusalReason::Tamper),
                "not pushed: git's own files\n- `.git/hooks/x`: a hook\n"
            ),
            "❌ Stopped: `tamper`. not pushed: git's own files\n\n- `.git/hooks/x`: a hook\n"
        );
        let second = Attempt {
            number: 2,
            of: 5,
            after: Some("forge_error: GET /repos/o/r/issues/1: HTTP 502\nmore".into()),
        };
        let at = |attempt: &Attempt| {
            working_on(Checklist::PullRequest, Stage::Agent, &before_agent, attempt)
        };
        let first = working(Checklist::PullRequest, Stage::Agent, &before_agent);
        assert_eq!(
            at(&second),
            first.clone()
                + "\n_Attempt 2 of 5, after: forge_error: GET /repos/o/r/issues/1: HTTP 502_\n"
        );
        assert_eq!(at(&Attempt::first()), first);
        assert_eq!(
            retrying(&second, Reason::Infra, "the sandbox did not start\ndetail"),
            "🔁 **Attempt 2 of 5 failed**: `infra`. the sandbox did not start\n\nI will try again shortly (attempt 3 of 5).\n"
        );
        assert_eq!(
            done("https://x/pull/2", 2, false, None, None),
            "✅ Opened #2: https://x/pull/2\n"
        );
    }

    #[test]
    fn the_pull_request_body_closes_the_issue_and_says_what_it_cost() {
        let body = pull_request_body(&PullRequestBody {
            summary: "Fixed add.",
            closes: 7,
            files: &["calc.sh".into()],
            findings: "",
            left_out: "- `fifo` (a named pipe: git cannot hold it)\n",
            isolation: "namespace sandbox (shared kernel)",
            spend: Some(forgehand_model::Spend {
                usage: forgehand_model::Usage {
                    input_tokens: 1_200,
                    output_tokens: 800,
                    cache_read_tokens: 9_000,
                    cache_write_tokens: 2_200,
                },
                cost_usd: Some(0.0123),
            }),
            turns: 4,
            duration: Duration::from_secs(42),
            testing: None,
            environment: None,
            drift: &[],
        });
        assert!(body.starts_with("Fixed add.\n\nCloses #7\n"), "{body}");
        assert!(body.contains("- `calc.sh`"));
        assert!(
            body.contains("**Left out**") && body.contains("- `fifo` (a named pipe"),
            "{body}"
        );
        assert!(
            body.contains(
                "4 turns · 12,400 tokens in (9,000 cached, 2,200 written to the cache) · 800 out · $0.0123 · 42 s"
            ),
            "{body}"
        );
    }

    #[test]
    fn a_model_error_shows_no_address_or_answer_on_the_forge() {
        let said = "the model server kept failing (2 tries); the last: the model server at http://10.0.3.7:8000/v1/chat/completions answered 500: {\"error\":\"CUDA out of memory\"}";
        let attempt = Attempt {
            number: 1,
            of: 5,
            after: None,
        };
        for text in [
            failed(Reason::ModelError, said),
            retrying(&attempt, Reason::ModelError, said),
        ] {
            assert!(
                !text.contains("10.0.3.7") && !text.contains("CUDA"),
                "{text}"
            );
            assert!(
                text.contains("`model_error`") && text.contains("the model's API failed"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_model_with_no_price_is_said_to_be_unpriced_never_free() {
        let spend = Spend {
            usage: forgehand_model::Usage {
                input_tokens: 1_234_567,
                output_tokens: 12,
                ..Default::default()
            },
            cost_usd: None,
        };
        assert_eq!(
            spend_line(&spend),
            "1,234,567 tokens in · 12 out · unpriced"
        );
        let free = Spend {
            cost_usd: Some(0.0),
            ..spend
        };
        assert_eq!(spend_line(&free), "1,234,567 tokens in · 12 out · $0.0000");
    }
}
