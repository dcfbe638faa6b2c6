//! The one status comment a job keeps up to date, and the pull request's
//! body: what a maintainer reads.

use std::time::Duration;

/// The checklist's steps, in order.
pub const STEPS: &[&str] = &[
    "authorized",
    "working copy ready",
    "agent at work",
    "integrity and secret checks",
    "pushed",
    "pull request",
];

/// The status comment while the job runs: steps before `current` done.
pub fn working(current: usize) -> String {
    let mut out = String::from("🛠️ **Forgehand is working on this.**\n\n");
    for (i, step) in STEPS.iter().enumerate() {
        let mark = if i < current { "x" } else { " " };
        let now = if i == current { " ← now" } else { "" };
        out.push_str(&format!("- [{mark}] {step}{now}\n"));
    }
    out
}

/// The final form when a pull request was opened or updated.
pub fn done(pr_url: &str, pr_number: u64, updated: bool) -> String {
    let verb = if updated { "Updated" } else { "Opened" };
    format!("✅ {verb} #{pr_number}: {pr_url}\n")
}

/// The final form of a failed job: its reason code and one line.
pub fn failed(reason: &str, explanation: &str) -> String {
    let first = explanation.lines().next().unwrap_or_default();
    format!("❌ Stopped: `{reason}`. {first}\n")
}

pub struct PullRequestBody<'a> {
    pub summary: &'a str,
    /// `Closes #N`.
    pub closes: u64,
    pub files: &'a [String],
    pub findings: &'a str,
    pub isolation: &'a str,
    pub cost_usd: f64,
    pub turns: u32,
    pub duration: Duration,
}

pub fn pull_request_body(b: &PullRequestBody<'_>) -> String {
    let mut out = format!("{}\n\nCloses #{}\n", b.summary.trim(), b.closes);
    if !b.files.is_empty() {
        out.push_str("\n**Files changed**\n\n");
        for file in b.files {
            out.push_str(&format!("- `{file}`\n"));
        }
    }
    if !b.findings.is_empty() {
        out.push_str("\n**Needs a careful look** (sensitive files, pushed because allowed)\n\n");
        out.push_str(b.findings);
    }
    out.push_str(&format!(
        "\n---\n<sub>Forgehand · {} · {} turns · ${:.4} · {} s</sub>\n",
        b.isolation,
        b.turns,
        b.cost_usd,
        b.duration.as_secs()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_comment_reads_as_a_checklist_and_ends_in_one_line() {
        assert_eq!(
            working(2),
            "🛠️ **Forgehand is working on this.**\n\n- [x] authorized\n- [x] working copy ready\n- [ ] agent at work ← now\n- [ ] integrity and secret checks\n- [ ] pushed\n- [ ] pull request\n"
        );
        assert_eq!(
            failed("budget:turns", "the agent used all its turns\nmore"),
            "❌ Stopped: `budget:turns`. the agent used all its turns\n"
        );
        assert_eq!(
            done("https://x/pull/2", 2, false),
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
            isolation: "namespace sandbox (shared kernel)",
            cost_usd: 0.0123,
            turns: 4,
            duration: Duration::from_secs(42),
        });
        assert!(body.starts_with("Fixed add.\n\nCloses #7\n"), "{body}");
        assert!(body.contains("- `calc.sh`"));
        assert!(body.contains("4 turns · $0.0123 · 42 s"), "{body}");
    }
}
