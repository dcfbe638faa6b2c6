//! Everything a job writes where people read it, under inline snapshot
//! tests: the status comment at each stage and in each final form, the
//! pull request's body, the replies in review threads, the one-line
//! replies, and the help text. A change of wording shows here as a diff
//! to review (`cargo insta review`), never by accident.

use std::time::Duration;

use forgehand_forge::{ForgeKind, Repo};
use forgehand_gate::RefusalReason;
use insta::assert_snapshot;

use super::replies;
use super::replies::thread_reply;
use super::status::{self, Attempt, Checklist, PullRequestBody};
use crate::job::{Command, HeldCommit, HeldFor, Job, Task};
use crate::store::JobState;
use forgehand_agent::tools::{CommandRun, ThreadReply};
use forgehand_jobcore::environment::{By, EnvironmentReport, TestCommand, Testing};
use forgehand_jobcore::Stage;
use forgehand_model::{Spend, Usage};
use forgehand_types::reason::{Budget, EnvProblem, Reason};
use forgehand_types::JobId;

fn job(task: Task, on_pull_request: bool) -> Job {
    Job {
        forge: ForgeKind::Github,
        repo: Repo {
            owner: "acme".into(),
            name: "widgets".into(),
            clone_url: None,
            default_branch: None,
            private: false,
        },
        target: 7,
        on_pull_request,
        requested_by: "maintainer".into(),
        task,
    }
}

/// Every stage before the current one done, as in a job whose tests ran.
fn all_done(_: Stage) -> bool {
    true
}

#[test]
fn the_status_comment_at_each_stage() {
    let each: Vec<String> = Checklist::PullRequest
        .stages()
        .iter()
        .map(|stage| status::working(Checklist::PullRequest, *stage, &all_done))
        .collect();
    assert_snapshot!(each.join("\n---\n"), @"
    🛠️ **Forgehand is working on this.**

    - [ ] authorized ← now
    - [ ] working copy
    - [ ] environment
    - [ ] agent
    - [ ] tests
    - [ ] gate, commit and push
    - [ ] pull request

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [ ] working copy ← now
    - [ ] environment
    - [ ] agent
    - [ ] tests
    - [ ] gate, commit and push
    - [ ] pull request

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [ ] environment ← now
    - [ ] agent
    - [ ] tests
    - [ ] gate, commit and push
    - [ ] pull request

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [ ] agent ← now
    - [ ] tests
    - [ ] gate, commit and push
    - [ ] pull request

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [x] agent
    - [ ] tests ← now
    - [ ] gate, commit and push
    - [ ] pull request

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [x] agent
    - [x] tests
    - [ ] gate, commit and push ← now
    - [ ] pull request

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [x] agent
    - [x] tests
    - [x] gate, commit and push
    - [ ] pull request ← now
    ");
}

/// Each kind of job lists what it goes through, and a stage passed by
/// is not ticked: a plan pushes nothing, a follow-up opens no pull
/// request, a released change runs no agent, and tests that were not run
/// say so (they were ticked whether or not any ran).
#[test]
fn the_checklist_lists_what_the_job_does_and_only_what_was_done_is_ticked() {
    let untested = |s: Stage| s != Stage::Tests;
    let each = [
        status::working(Checklist::PullRequest, Stage::Publish, &untested),
        status::working(Checklist::Plan, Stage::Agent, &all_done),
        status::working(Checklist::FollowUp, Stage::Publish, &all_done),
        status::working(Checklist::Release, Stage::PullRequest, &all_done),
        status::working(Checklist::ReleaseFollowUp, Stage::Publish, &all_done),
    ];
    assert_snapshot!(each.join("\n---\n"), @"
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [x] agent
    - [ ] tests: none run
    - [ ] gate, commit and push ← now
    - [ ] pull request

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [ ] agent ← now

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [x] agent
    - [x] tests
    - [ ] gate, commit and push ← now

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] gate, commit and push
    - [ ] pull request ← now

    ---
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [ ] gate, commit and push ← now
    ");
}

#[test]
fn the_status_comment_of_a_later_attempt() {
    let second = Attempt {
        number: 2,
        of: 5,
        after: Some("forge_error: GET /repos/acme/widgets/issues/7: HTTP 502\nmore".into()),
    };
    assert_snapshot!(status::working_on(Checklist::PullRequest, Stage::Agent, &all_done, &second), @"
    🛠️ **Forgehand is working on this.**

    - [x] authorized
    - [x] working copy
    - [x] environment
    - [ ] agent ← now
    - [ ] tests
    - [ ] gate, commit and push
    - [ ] pull request

    _Attempt 2 of 5, after: forge_error: GET /repos/acme/widgets/issues/7: HTTP 502_
    ");
    assert_snapshot!(status::retrying(&second, Reason::Infra, "the sandbox did not start\ndetail"), @"
    🔁 **Attempt 2 of 5 failed**: `infra`. the sandbox did not start

    I will try again shortly (attempt 3 of 5).
    ");
}

#[test]
fn the_status_comments_final_forms() {
    assert_snapshot!(status::done("https://forge/acme/widgets/pull/8", 8, false, None, None), @"✅ Opened #8: https://forge/acme/widgets/pull/8");
    assert_snapshot!(status::done("https://forge/acme/widgets/pull/8", 8, true, None, None), @"✅ Updated #8: https://forge/acme/widgets/pull/8");
    assert_snapshot!(
        status::failed(Reason::Budget(Budget::Turns), "the agent used all its turns (agent.max_turns)\ndetail"),
        @"❌ Stopped: `budget:turns`. the agent used all its turns (agent.max_turns)"
    );
    assert_snapshot!(
        status::failed(
            Reason::Gate(RefusalReason::Sensitive),
            "not pushed: the change touches files that run code or steer agents\n- `.github/workflows/ci.yml`: a CI definition\n- `Makefile`: a build entry point\n"
        ),
        @"
    ❌ Stopped: `sensitive`. not pushed: the change touches files that run code or steer agents

    - `.github/workflows/ci.yml`: a CI definition
    - `Makefile`: a build entry point
    "
    );
    assert_snapshot!(status::failed(Reason::NoChanges, "the agent finished without changing anything"), @"❌ Stopped: `no_changes`. the agent finished without changing anything");
    assert_snapshot!(status::stopped("stopped by @maintainer"), @"⏹️ Stopped by @maintainer (`stopped`).");
    assert_snapshot!(status::stopped("the node is shutting down"), @"⏹️ Stopped (`stopped`): the node is shutting down.");
    assert_snapshot!(status::planned("1. Read calc.py.\n2. Fix add().", "forgehand"), @"
    📋 **Here is my plan.** Nothing is changed yet.

    1. Read calc.py.
    2. Fix add().

    Say `/forgehand go` (or `@forgehand go`) to carry it out, or comment to change it and ask `/forgehand plan` again.
    ");
}

fn held(held_for: Vec<HeldFor>) -> HeldCommit {
    HeldCommit {
        commit: forgehand_types::CommitSha::parse("0123456789abcdef0123456789abcdef01234567")
            .unwrap(),
        reference: "refs/forgehand/held/12".into(),
        branch: "forgehand/7-fix-add".into(),
        base: "main".into(),
        expected: None,
        held_for,
        title: "Fix add".into(),
        summary: "It adds now.".into(),
        files: vec!["calc.sh".into(), "Makefile".into()],
        findings: "- sensitive: `Makefile` added (a build entry point)\n".into(),
        testing: None,
    }
}

#[test]
fn the_status_comment_of_a_held_change() {
    assert_snapshot!(
        status::held(RefusalReason::Sensitive, &held(vec![HeldFor::Sensitive])),
        @"
        ✋ Held for a maintainer: `sensitive`. The changes touch files that are not ordinary source, tests or documentation, so I did not push the change.

        - sensitive: `Makefile` added (a build entry point)

        The change is kept as commit `0123456789`, on no branch the forge sees. Saying `/forgehand allow-sensitive` pushes exactly that commit and opens the pull request; the agent does not run again. `/forgehand retry` runs the job anew instead.
        "
    );
    assert_snapshot!(
        status::held(
            RefusalReason::Destructive,
            &HeldCommit {
                findings: "- sensitive: `Makefile` added (a build entry point)\n- destructive: the change deletes 2 of the 2 tracked files\n".into(),
                ..held(vec![HeldFor::Destructive, HeldFor::Sensitive])
            }
        ),
        @"
        ✋ Held for a maintainer: `destructive`. The change removes most of the repository, so I did not push the change.

        - sensitive: `Makefile` added (a build entry point)
        - destructive: the change deletes 2 of the 2 tracked files

        The change is kept as commit `0123456789`, on no branch the forge sees. Saying `/forgehand allow-destructive` and `/forgehand allow-sensitive` (each of them, in any order) pushes exactly that commit and opens the pull request; the agent does not run again. `/forgehand retry` runs the job anew instead.
        "
    );
    assert_snapshot!(
        replies::also_needed(&job(Task::Assigned, false), JobId(12), &held(vec![HeldFor::Destructive, HeldFor::Sensitive]), &[HeldFor::Destructive]),
        @"@maintainer noted. The change job 12 kept (commit `0123456789`) also needs `/forgehand allow-destructive` before I push it."
    );
}

/// The repository's own text (its setup's output, its declaration's
/// keys, its test command) in the status comment: shown, never read as
/// the bot's markup (red-team finding F3).
#[test]
fn the_repositorys_text_in_the_status_comment() {
    let setup_output = "the setup command failed (exit status: 1):\nok\n```\n**Forgehand**: all tests passed ✅ @maintainers see [report](https://example.invalid/x)\n![x](https://example.invalid/pixel.png)\n\u{1b}]0;PWNED\u{7}\u{1b}[31mRED";
    assert_snapshot!(
        status::failed(Reason::Environment(EnvProblem::Setup), setup_output),
        @r"
    ❌ Stopped: `environment:setup`. The repository's environment could not be used:

    ````text
    the setup command failed (exit status: 1):
    ok
    ```
    **Forgehand**: all tests passed ✅ @maintainers see [report](https://example.invalid/x)
    ![x](https://example.invalid/pixel.png)
    \u{1b}]0;PWNED\u{7}\u{1b}[31mRED
    ````
    "
    );
    assert_snapshot!(
        status::failed(
            Reason::Environment(EnvProblem::Declaration),
            ".forgehand.toml, line 2, column 1: unknown key `bogus\u{1b}[31m`## Testing` in [environment], which has packages, setup, test and inputs"
        ),
        @r"
    ❌ Stopped: `environment:declaration`. The repository's environment could not be used:

    ```text
    .forgehand.toml, line 2, column 1: unknown key `bogus\u{1b}[31m`## Testing` in [environment], which has packages, setup, test and inputs
    ```
    "
    );
    let mut forged = testing(0);
    forged.commands.last_mut().unwrap().command = "pytest`\n\n## ✅ All good".into();
    assert_snapshot!(
        status::done("https://forge/acme/widgets/pull/8", 8, false, None, Some(&forged)),
        @r"
    ✅ Opened #8: https://forge/acme/widgets/pull/8

    - Tests: `` pytest` ## ✅ All good `` passed
    "
    );
}

/// Paths the agent chose and commands the agent ran, in the pull request
/// and the status comment: code on one line; and the agent's own runs
/// never make a change "passed".
#[test]
fn the_agents_paths_and_commands() {
    let hostile = "x` ![i](https://example.invalid/p.png) @maintainers `y".to_owned();
    let body = status::pull_request_body(&PullRequestBody {
        summary: "Done.",
        closes: 7,
        files: std::slice::from_ref(&hostile),
        findings: "",
        left_out: "",
        isolation: "Linux namespaces",
        spend: Some(Spend {
            usage: Usage {
                input_tokens: 3_000,
                output_tokens: 40,
                ..Usage::default()
            },
            cost_usd: None,
        }),
        turns: 1,
        duration: Duration::from_secs(1),
        testing: Some(&testing(0)),
        environment: None,
        drift: std::slice::from_ref(&hostile),
    });
    assert_snapshot!(body, @r"
    Done.

    Closes #7

    **Files changed**

    - `` x` ![i](https://example.invalid/p.png) @maintainers `y ``

    **Testing** (what Forgehand saw run, not what the agent says)

    This change edits `` x` ![i](https://example.invalid/p.png) @maintainers `y ``, which defines the repository's environment: the tests ran in the environment of the base branch, not one built from this change.

    The last test run passed.

    | Command | Run by | Exit status |
    | --- | --- | --- |
    | `python -m pytest -q` | agent | 1 |
    | `python -m pytest -q` | agent | 0 |
    | `$HOME/.venv/bin/python -m pytest` | Forgehand | 0 |

    ---
    <sub>Forgehand · Linux namespaces · 1 turns · 3,000 tokens in · 40 out · unpriced · 1 s</sub>
    ");
    // Without a run of Forgehand's, the agent's own says nothing passed.
    let agent_only = Testing::observed(
        &[CommandRun {
            command: "trap 'exit 0' EXIT; sh test.sh".into(),
            exit_code: 0,
        }],
        None,
        &[],
    );
    assert_snapshot!(
        status::done("https://forge/acme/widgets/pull/8", 8, false, None, Some(&agent_only)),
        @r"
    ✅ Opened #8: https://forge/acme/widgets/pull/8

    - Tests: none run by Forgehand; the agent's `trap 'exit 0' EXIT; sh test.sh` exited 0 in its own sandbox
    "
    );
    assert_snapshot!(agent_only.to_markdown(), @r"
    Forgehand ran no test of its own (the repository declares no test command, and none was detected): this change is untested. The agent's runs, in its own sandbox, as its shell reported them:

    | Command | Run by | Exit status |
    | --- | --- | --- |
    | `trap 'exit 0' EXIT; sh test.sh` | agent | 0 |
    ");
}

#[test]
fn the_pull_request_body() {
    let body = status::pull_request_body(&PullRequestBody {
        summary: "Fixed `add` to add.\n\nThe tests pass.",
        closes: 7,
        files: &["calc.py".into(), "tests/test_calc.py".into()],
        findings: "- `Makefile`: a build entry point\n",
        left_out: "- `fifo` (a named pipe: git cannot hold it)\n",
        isolation: "Linux namespaces (bubblewrap): no network, but the host's kernel is shared",
        spend: Some(Spend {
            usage: Usage {
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
    assert_snapshot!(body, @"
    Fixed `add` to add.

    The tests pass.

    Closes #7

    **Files changed**

    - `calc.py`
    - `tests/test_calc.py`

    **Needs a careful look** (sensitive files, pushed because allowed)

    - `Makefile`: a build entry point

    **Left out** (pipes, sockets or devices: git cannot hold them)

    - `fifo` (a named pipe: git cannot hold it)

    ---
    <sub>Forgehand · Linux namespaces (bubblewrap): no network, but the host's kernel is shared · 4 turns · 12,400 tokens in (9,000 cached, 2,200 written to the cache) · 800 out · $0.0123 · 42 s</sub>
    ");
}

fn environment(reused: bool) -> EnvironmentReport {
    EnvironmentReport {
        key: "0".repeat(64),
        reused,
        setup_secs: 41.6,
        source: "detected from the repository's files: pip".into(),
        packages: vec!["python3-pip".into(), "python3-venv".into()],
        setup: Some(
            "python3 -m venv $HOME/.venv && $HOME/.venv/bin/pip install -r requirements.txt".into(),
        ),
        test: Some("$HOME/.venv/bin/python -m pytest".into()),
        inputs: vec!["requirements.txt".into()],
    }
}

fn testing(exit_code: i32) -> Testing {
    let ran = |command: &str, exit_code: i32| CommandRun {
        command: command.into(),
        exit_code,
    };
    Testing::observed(
        &[
            ran("ls", 0),
            ran("python -m pytest -q", 1),
            ran("python -m pytest -q", 0),
        ],
        Some("$HOME/.venv/bin/python -m pytest"),
        &[TestCommand {
            command: "$HOME/.venv/bin/python -m pytest".into(),
            exit_code,
            by: By::Host,
        }],
    )
}

/// With an environment and the host's test runs: what the status comment
/// and the pull request say of them, passed and failed.
#[test]
fn the_evidence_of_testing() {
    let (passed, failed) = (testing(0), testing(1));
    assert_snapshot!(status::done("https://forge/acme/widgets/pull/8", 8, false, Some(&environment(false)), Some(&passed)), @"
    ✅ Opened #8: https://forge/acme/widgets/pull/8

    - Environment: detected from the repository's files: pip (set up for this job in 42 s)
    - Tests: `$HOME/.venv/bin/python -m pytest` passed
    ");
    assert_snapshot!(status::done("https://forge/acme/widgets/pull/8", 8, false, Some(&environment(true)), Some(&failed)), @"
    ✅ Opened #8 as a draft: https://forge/acme/widgets/pull/8

    - Environment: detected from the repository's files: pip (reused, no setup run)
    - Tests: `$HOME/.venv/bin/python -m pytest` failed (exit status 1)
    ");
    let body = status::pull_request_body(&PullRequestBody {
        summary: "Fixed `add`.",
        closes: 7,
        files: &["calc.py".into()],
        findings: "",
        left_out: "",
        isolation: "Linux namespaces (bubblewrap)",
        spend: Some(Spend {
            usage: Usage {
                input_tokens: 41_000,
                output_tokens: 2_100,
                ..Usage::default()
            },
            cost_usd: Some(0.1545),
        }),
        turns: 3,
        duration: Duration::from_secs(9),
        testing: Some(&failed),
        environment: Some(&environment(true)),
        drift: &["requirements.txt".to_owned()],
    });
    assert_snapshot!(body, @"
    Fixed `add`.

    Closes #7

    **Files changed**

    - `calc.py`

    **Testing** (what Forgehand saw run, not what the agent says)

    Environment: detected from the repository's files: pip (reused, no setup run).

    This change edits `requirements.txt`, which defines the repository's environment: the tests ran in the environment of the base branch, not one built from this change.

    **The last test run failed**: this pull request is a draft until it passes.

    | Command | Run by | Exit status |
    | --- | --- | --- |
    | `python -m pytest -q` | agent | 1 |
    | `python -m pytest -q` | agent | 0 |
    | `$HOME/.venv/bin/python -m pytest` | Forgehand | 1 |

    ---
    <sub>Forgehand · Linux namespaces (bubblewrap) · 3 turns · 41,000 tokens in · 2,100 out · $0.1545 · 9 s</sub>
    ");
    let untested = Testing::observed(&[], None, &[]);
    assert_snapshot!(untested.to_markdown(), @"No test command was run: this change is untested.");
}

#[test]
fn the_replies_in_review_threads() {
    let replies = [
        ThreadReply {
            thread: 1,
            changed: true,
            note: "Renamed it.".into(),
        },
        ThreadReply {
            thread: 2,
            changed: false,
            note: "The name is part of the public API.".into(),
        },
    ];
    let each: Vec<String> = (1..=3)
        .map(|n| thread_reply(&replies, n, "0123456789"))
        .collect();
    assert_snapshot!(each.join("\n"), @"
    Done in 0123456789: Renamed it.
    No change: The name is part of the public API.
    Done in 0123456789.
    ");
}

#[test]
fn the_one_line_replies() {
    let labeled = job(
        Task::Labeled {
            label: "forgehand".into(),
        },
        false,
    );
    let plan_on_pr = job(
        Task::Command {
            command: Command::Plan { instructions: None },
            comment_id: 3,
        },
        true,
    );
    let all = [
        replies::not_authorized("drive-by"),
        replies::nothing_to_stop(&labeled),
        replies::nothing_to_retry_yet(&labeled),
        replies::nothing_to_retry(&labeled, JobId(12), JobState::Succeeded),
        replies::nothing_to_retry(&labeled, JobId(12), JobState::Running),
        replies::no_plan(&labeled),
        replies::unsupported(&plan_on_pr),
    ];
    assert_snapshot!(all.join("\n"), @"
    @drive-by thanks for asking! I only take requests from people with write access to this repository, so I will leave this one to a maintainer.
    @maintainer there is nothing to stop: no job of mine is running or waiting on #7.
    @maintainer there is nothing to retry: I have not worked on #7 before.
    @maintainer there is nothing to retry: my last job on #7 (job 12) succeeded.
    @maintainer there is nothing to retry: my last job on #7 (job 12) is still running.
    @maintainer there is no plan to go ahead with on #7: ask `/forgehand plan` first.
    @maintainer `/forgehand plan` works on issues; on a pull request, ask for the change itself. `/forgehand help` lists what I understand.
    ");
}

#[test]
fn the_help_text() {
    assert_snapshot!(crate::command::help_text("forgehand"), @"
    **What I understand**

    Write a command at the start of a line in a comment:

    | Command | What it does |
    | --- | --- |
    | `/forgehand fix [instructions]` | Work on this issue and open a pull request. Anything after `fix` is passed on as instructions. |
    | `/forgehand plan [instructions]` | Write a plan first and wait for `go` before changing any code. |
    | `/forgehand go` | Go ahead with the plan. |
    | `/forgehand stop` | Stop what I am doing. |
    | `/forgehand retry` | Try the last run again. |
    | `/forgehand allow-sensitive` | Let my changes to CI definitions, agent instructions, CODEOWNERS and build entry points be pushed (they are always listed in the pull request). |
    | `/forgehand allow-destructive` | Let my change be pushed though it deletes or empties most of the repository's files. |
    | `/forgehand help` | Show this message. |

    You can also mention me: `@forgehand fix the flaky login test`, or ask in plain words, like `@forgehand why does the build fail on Windows?`

    Instructions may go on over the next lines, up to a blank line. Commands inside code blocks, `inline code`, `>` quotes and HTML comments are ignored, and case does not matter.
    ");
    // Another bot name is named, and works as a prefix too.
    assert_snapshot!(crate::command::help_text("acme-bot"), @"
    **What I understand**

    Write a command at the start of a line in a comment:

    | Command | What it does |
    | --- | --- |
    | `/forgehand fix [instructions]` | Work on this issue and open a pull request. Anything after `fix` is passed on as instructions. |
    | `/forgehand plan [instructions]` | Write a plan first and wait for `go` before changing any code. |
    | `/forgehand go` | Go ahead with the plan. |
    | `/forgehand stop` | Stop what I am doing. |
    | `/forgehand retry` | Try the last run again. |
    | `/forgehand allow-sensitive` | Let my changes to CI definitions, agent instructions, CODEOWNERS and build entry points be pushed (they are always listed in the pull request). |
    | `/forgehand allow-destructive` | Let my change be pushed though it deletes or empties most of the repository's files. |
    | `/forgehand help` | Show this message. |

    `/acme-bot` works as well as `/forgehand`. You can also mention me: `@acme-bot fix the flaky login test`, or ask in plain words, like `@acme-bot why does the build fail on Windows?`

    Instructions may go on over the next lines, up to a blank line. Commands inside code blocks, `inline code`, `>` quotes and HTML comments are ignored, and case does not matter.
    ");
}
