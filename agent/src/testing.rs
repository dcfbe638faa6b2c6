//! The evidence of testing a pull request carries: each test command the
//! agent and the host ran, with its exit status, as the host observed it,
//! never as the model tells it.

use serde::{Deserialize, Serialize};

use forgehand_text::markdown;

/// Who ran a test command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    Agent,
    Host,
}

/// A command the agent ran in the sandbox, and its exit status.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommandRun {
    pub command: String,
    pub exit_code: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestCommand {
    pub command: String,
    pub exit_code: i32,
    pub by: By,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestResult {
    Passed,
    Failed,
    /// Nothing was run that tests.
    None,
}

/// What was tested, and how it came out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Testing {
    pub commands: Vec<TestCommand>,
    pub result: TestResult,
    /// With no environment (nothing declared or detected): a
    /// `.forgehand.toml` to start from (the environment crate's `spec::propose`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
}

/// At most this many test commands are reported.
const MAX_REPORTED: usize = 50;

impl Testing {
    /// The test commands among what the agent ran (the declared test
    /// command, or a known test runner), then the host's own runs. The
    /// host's last run decides the result when there is one. Without one,
    /// the agent's runs can say "failed" but never "passed": they ran in
    /// its own sandbox, whose shell, `PATH` and files the model controls
    /// (a `trap 'exit 0' EXIT` makes any run "pass").
    pub fn observed(agent: &[CommandRun], declared: Option<&str>, host: &[TestCommand]) -> Self {
        let mut commands: Vec<TestCommand> = agent
            .iter()
            .filter(|c| looks_like_a_test(&c.command, declared))
            .map(|c| TestCommand {
                command: c.command.clone(),
                exit_code: c.exit_code,
                by: By::Agent,
            })
            .collect();
        if commands.len() > MAX_REPORTED {
            commands.drain(..commands.len() - MAX_REPORTED);
        }
        commands.extend(host.iter().cloned());
        let result = match (host.last(), commands.last()) {
            (Some(c), _) if c.exit_code == 0 => TestResult::Passed,
            (Some(_), _) => TestResult::Failed,
            (None, Some(c)) if c.exit_code != 0 => TestResult::Failed,
            (None, _) => TestResult::None,
        };
        Testing {
            commands,
            result,
            proposal: None,
        }
    }

    /// The pull request's "Testing" section, in Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        if let (TestResult::None, Some(proposal)) = (self.result, &self.proposal) {
            out.push_str(
                "No environment: the tests were not run — declare one in `.forgehand.toml`, for example:\n\n",
            );
            out.push_str(&markdown::fenced(proposal));
            if self.commands.is_empty() {
                return out;
            }
            out.push('\n');
        }
        match self.result {
            TestResult::Passed => out.push_str("The last test run passed.\n\n"),
            TestResult::Failed => out.push_str(
                "**The last test run failed**: this pull request is a draft until it passes.\n\n",
            ),
            TestResult::None if self.commands.is_empty() => {
                out.push_str("No test command was run: this change is untested.\n");
                return out;
            }
            TestResult::None => out.push_str(
                "Forgehand ran no test of its own (the repository declares no test command, and none was detected): this change is untested. The agent's runs, in its own sandbox, as its shell reported them:\n\n",
            ),
        }
        out.push_str("| Command | Run by | Exit status |\n| --- | --- | --- |\n");
        for c in &self.commands {
            let who = match c.by {
                By::Agent => "agent",
                By::Host => "Forgehand",
            };
            // In a table cell, a pipe is escaped even in code.
            let command = markdown::code(&markdown::cut(&markdown::one_line(&c.command), 200))
                .replace('|', "\\|");
            out.push_str(&format!("| {command} | {who} | {} |\n", c.exit_code));
        }
        out
    }
}

/// The commands known to run tests, by their words: the first is the
/// program (or a path to it).
const RUNNERS: &[&[&str]] = &[
    &["pytest"],
    &["py.test"],
    &["npm", "test"],
    &["npm", "t"],
    &["npm", "run", "test"],
    &["yarn", "test"],
    &["yarnpkg", "test"],
    &["pnpm", "test"],
    &["pnpm", "run", "test"],
    &["npx", "jest"],
    &["npx", "vitest"],
    &["npx", "mocha"],
    &["jest"],
    &["vitest"],
    &["mocha"],
    &["cargo", "test"],
    &["cargo", "nextest"],
    &["go", "test"],
    &["make", "test"],
    &["make", "check"],
    &["ctest"],
    &["tox"],
    &["nox"],
    &["rspec"],
    &["phpunit"],
    &["mvn", "test"],
    &["gradle", "test"],
    &["gradlew", "test"],
    &["dotnet", "test"],
    &["mix", "test"],
    &["swift", "test"],
];

/// Python modules that run tests (`python -m pytest`).
const TEST_MODULES: &[&str] = &["pytest", "unittest", "tox", "nox"];

/// Words that run the rest (`timeout 600 pytest`, `uv run pytest`).
const WRAPPERS: &[&[&str]] = &[
    &["uv", "run"],
    &["poetry", "run"],
    &["pipenv", "run"],
    &["pdm", "run"],
    &["hatch", "run"],
    &["bundle", "exec"],
];

/// Whether a shell command runs tests, so that its exit status is theirs:
/// the repository's declared test command, or one of the common test
/// runners, as the command's last step (after `cd web &&`, say), with
/// nothing after it that decides the status instead (`| tail`, `||
/// true`, `&`). A command that merely names the test (`echo pytest`) does
/// not run it.
pub fn looks_like_a_test(command: &str, declared: Option<&str>) -> bool {
    let normal = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let whole = normal(command);
    if let Some(declared) = declared.map(normal).filter(|d| !d.is_empty()) {
        // A declared command of several steps, as it is (after a `cd`).
        if whole == declared
            || whole.ends_with(&format!("&& {declared}"))
            || whole.ends_with(&format!("; {declared}"))
        {
            return true;
        }
    }
    let Some(last) = last_step(command) else {
        return false;
    };
    let words = program_words(&last);
    if let Some(declared) = declared {
        let declared: Vec<&str> = declared.split_whitespace().collect();
        if !declared.is_empty() && words.starts_with(&declared) {
            return true;
        }
    }
    runs_a_runner(&words) || runs_a_test_script(&words)
}

/// The last step of a command list (split at `&&`, `;` and line breaks),
/// when nothing in it but its program decides its exit status.
fn last_step(command: &str) -> Option<String> {
    let mut last = command;
    for separator in ["&&", ";", "\n"] {
        if let Some((_, after)) = last.rsplit_once(separator) {
            last = after;
        }
    }
    let mut last = last.trim();
    if last.is_empty() {
        // `pytest;` or a trailing line break: the step before.
        let trimmed = command.trim_end().trim_end_matches([';', '\n']).trim_end();
        if trimmed.len() == command.trim_end().len() {
            return None;
        }
        return last_step(trimmed);
    }
    // A pipe or `||` decides the status; so does `&` (in the background),
    // but not in a redirection (`2>&1`).
    let operators = last.replace(">&", "").replace("&>", "");
    if operators.contains('|') || operators.contains('&') {
        return None;
    }
    last = last.trim_start_matches('(').trim_end_matches(')').trim();
    Some(last.to_owned())
}

/// The words from the program on: variable assignments (`CI=1`) and
/// wrappers (`timeout 600`, `env`, `time`, `uv run`) left out.
fn program_words(step: &str) -> Vec<&str> {
    let mut words: Vec<&str> = step.split_whitespace().collect();
    loop {
        let assignment = |w: &str| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        };
        match words.as_slice() {
            [first, ..] if assignment(first) => {
                words.remove(0);
            }
            ["env" | "time" | "nice" | "command" | "exec", ..] => {
                words.remove(0);
            }
            ["timeout", ..] => {
                words.remove(0);
                while words.first().is_some_and(|w| w.starts_with('-')) {
                    words.remove(0);
                }
                if !words.is_empty() {
                    words.remove(0);
                }
            }
            _ => match WRAPPERS.iter().find(|w| words.starts_with(w)) {
                Some(wrapper) => {
                    words.drain(..wrapper.len());
                }
                None => return words,
            },
        }
    }
}

fn program(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn runs_a_runner(words: &[&str]) -> bool {
    let Some((first, rest)) = words.split_first() else {
        return false;
    };
    let python = program(first)
        .strip_prefix("python")
        .is_some_and(|version| version.chars().all(|c| c.is_ascii_digit() || c == '.'));
    if python {
        return matches!(rest, ["-m", module, ..] if TEST_MODULES.contains(module));
    }
    RUNNERS.iter().any(|runner| {
        runner[0] == program(first)
            && rest.len() >= runner.len() - 1
            && rest.iter().zip(&runner[1..]).all(|(a, b)| a == b)
    })
}

/// A repository's own test script, run directly (`./test.sh`,
/// `scripts/run-tests`) or by an interpreter (`sh test.sh`, `python3
/// tests.py`): its name begins with `test` or `run_tests`/`run-tests`.
fn runs_a_test_script(words: &[&str]) -> bool {
    const INTERPRETERS: &[&str] = &["sh", "bash", "python", "python3", "node", "ruby", "perl"];
    let script_like = |word: &str| {
        ["test", "run_tests", "run-tests"]
            .iter()
            .any(|prefix| program(word).starts_with(prefix))
    };
    match words {
        [first, second, ..] if INTERPRETERS.contains(&program(first)) => script_like(second),
        [first, ..] => first.contains('/') && script_like(first),
        [] => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(command: &str, exit_code: i32) -> CommandRun {
        CommandRun {
            command: command.into(),
            exit_code,
        }
    }

    #[test]
    fn test_runners_are_recognised_and_other_commands_are_not() {
        for yes in [
            "pytest -q",
            "python3 -m pytest tests/",
            "$HOME/.venv/bin/python -m pytest",
            "cd web && npm test",
            "cargo test --offline",
            "go test ./...",
            "python -m unittest discover",
            "/usr/bin/make test",
            "sh test.sh",
            "./test.sh --quick",
            "python3 tests/test_calc.py",
            "scripts/run-tests",
        ] {
            assert!(looks_like_a_test(yes, None), "{yes}");
        }
        for no in [
            "cat pytest.ini",
            "ls tests",
            "git status",
            "echo cargo",
            "npm install",
            "pytestify",
            // Naming a runner is not running it.
            "echo pytest -q",
            "grep -r 'cargo test' docs",
            // Something else decides the exit status.
            "pytest -q | tail -5",
            "pytest -q || true",
            "pytest -q; echo done",
            "npm test &",
        ] {
            assert!(!looks_like_a_test(no, None), "{no}");
        }
        for yes in [
            "pytest -q 2>&1",
            "CI=1 timeout 600 npm test",
            "uv run pytest",
            "(cd web && npm test)",
            "pytest -q;",
        ] {
            assert!(looks_like_a_test(yes, None), "{yes}");
        }
        let declared = Some("python3 test_x.py");
        assert!(looks_like_a_test("python3 test_x.py", declared));
        assert!(looks_like_a_test(
            "cd sub && python3 test_x.py -v",
            declared
        ));
        assert!(!looks_like_a_test("echo python3 test_x.py", declared));
        assert!(!looks_like_a_test(
            ": python3 test_x.py\n- `python3 test_x.py`: exit 0 (host)",
            declared
        ));
        let compound = Some("npm ci && npm test");
        assert!(looks_like_a_test("npm ci && npm test", compound));
        assert!(looks_like_a_test("cd web && npm ci && npm test", compound));
        assert!(looks_like_a_test(
            "./run-checks.sh --all",
            Some("./run-checks.sh")
        ));
    }

    #[test]
    fn the_hosts_last_run_decides_and_the_table_says_who_ran_what() {
        let agent = [ran("ls", 0), ran("pytest -q", 1), ran("pytest -q", 0)];
        let host = [TestCommand {
            command: "pytest -q".into(),
            exit_code: 0,
            by: By::Host,
        }];
        let testing = Testing::observed(&agent, Some("pytest -q"), &host);
        assert_eq!(testing.commands.len(), 3);
        assert_eq!(testing.result, TestResult::Passed);
        let md = testing.to_markdown();
        assert!(md.contains("| `pytest -q` | agent | 1 |"), "{md}");
        assert!(md.contains("| `pytest -q` | Forgehand | 0 |"), "{md}");
        // A declared test command is the repository's text.
        let forged = Testing::observed(
            &[],
            None,
            &[TestCommand {
                command: "pytest -q\n| `pytest` | Forgehand | 0 |\n\n## Fake".into(),
                exit_code: 1,
                by: By::Host,
            }],
        );
        let md = forged.to_markdown();
        assert_eq!(
            md.lines().count(),
            5,
            "the result, a blank line, the header, and one row for the command, whatever it holds: {md}"
        );
        assert!(
            md.contains(
                "| `` pytest -q \\| `pytest` \\| Forgehand \\| 0 \\| ## Fake `` | Forgehand | 1 |"
            ),
            "{md}"
        );

        let failed = Testing::observed(
            &[],
            None,
            &[TestCommand {
                exit_code: 2,
                ..host[0].clone()
            }],
        );
        assert_eq!(failed.result, TestResult::Failed);
        assert!(failed.to_markdown().contains("draft"));
        let none = Testing::observed(&[ran("ls", 0)], None, &[]);
        assert_eq!(none.result, TestResult::None);
        assert!(none.to_markdown().contains("untested"));
        // The agent's own runs never make a change "passed" (red-team
        // round 2, N2: `trap 'exit 0' EXIT; pytest` reports 0 whatever
        // the tests do); a failure it saw still counts.
        let agent_only = Testing::observed(&[ran("pytest -q", 0)], None, &[]);
        assert_eq!(agent_only.result, TestResult::None);
        let md = agent_only.to_markdown();
        assert!(
            md.contains("untested") && md.contains("| `pytest -q` | agent | 0 |"),
            "{md}"
        );
        let agent_failed = Testing::observed(&[ran("pytest -q", 1)], None, &[]);
        assert_eq!(agent_failed.result, TestResult::Failed);
    }
}
