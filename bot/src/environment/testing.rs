//! The evidence of testing a pull request carries: each test command the
//! agent and the host ran, with its exit status, as the host observed it,
//! never as the model tells it.

use serde::{Deserialize, Serialize};

use crate::agent::tools::CommandRun;

/// Who ran a test command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    Agent,
    Host,
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
}

/// At most this many test commands are reported.
const MAX_REPORTED: usize = 50;

impl Testing {
    /// The test commands among what the agent ran (the declared test
    /// command, or a known test runner), then the host's own runs. The
    /// host's last run decides the result when there is one; else the
    /// agent's last test command.
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
        let decisive = host.last().or(commands.last());
        let result = match decisive {
            Some(c) if c.exit_code == 0 => TestResult::Passed,
            Some(_) => TestResult::Failed,
            None => TestResult::None,
        };
        Testing { commands, result }
    }

    /// The pull request's "Testing" section, in Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        match self.result {
            TestResult::Passed => out.push_str("The last test run passed.\n\n"),
            TestResult::Failed => out.push_str(
                "**The last test run failed**: this pull request is a draft until it passes.\n\n",
            ),
            TestResult::None => {
                out.push_str("No test command was run: this change is untested.\n");
                return out;
            }
        }
        out.push_str("| Command | Run by | Exit status |\n| --- | --- | --- |\n");
        for c in &self.commands {
            let who = match c.by {
                By::Agent => "agent",
                By::Host => "Forgehand",
            };
            let command: String = c
                .command
                .replace('|', "\\|")
                .replace('`', "'")
                .chars()
                .take(200)
                .collect();
            out.push_str(&format!("| `{command}` | {who} | {} |\n", c.exit_code));
        }
        out
    }
}

/// Whether a shell command runs tests: the repository's declared test
/// command, or one of the common test runners.
pub fn looks_like_a_test(command: &str, declared: Option<&str>) -> bool {
    let command = command.trim();
    if declared.is_some_and(|d| !d.trim().is_empty() && command.contains(d.trim())) {
        return true;
    }
    const RUNNERS: &[&str] = &[
        "pytest",
        "py.test",
        "-m unittest",
        "npm test",
        "npm run test",
        "npm t ",
        "yarn test",
        "yarnpkg test",
        "pnpm test",
        "pnpm run test",
        "npx jest",
        "npx vitest",
        "jest",
        "vitest",
        "mocha",
        "cargo test",
        "go test",
        "make test",
        "make check",
        "ctest",
        "tox",
        "nox",
        "rspec",
        "phpunit",
        "mvn test",
        "gradle test",
        "./gradlew test",
        "dotnet test",
        "mix test",
        "swift test",
    ];
    let words: Vec<&str> = command.split_whitespace().collect();
    if runs_a_test_script(&words) {
        return true;
    }
    RUNNERS.iter().any(|runner| {
        let runner_words: Vec<&str> = runner.split_whitespace().collect();
        // A word is the runner itself, or a path to it (`/usr/bin/make`).
        let same =
            |word: &str, runner: &str| word == runner || word.ends_with(&format!("/{runner}"));
        words
            .windows(runner_words.len())
            .any(|w| w.iter().zip(&runner_words).all(|(a, b)| same(a, b)))
    })
}

/// A repository's own test script, run directly (`./test.sh`,
/// `scripts/run-tests`) or by an interpreter (`sh test.sh`, `python3
/// tests.py`): its name begins with `test` or `run_tests`/`run-tests`.
fn runs_a_test_script(words: &[&str]) -> bool {
    const INTERPRETERS: &[&str] = &["sh", "bash", "python", "python3", "node", "ruby", "perl"];
    let script_like = |word: &str| {
        let name = word.rsplit('/').next().unwrap_or(word);
        ["test", "run_tests", "run-tests"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
    };
    let program = |word: &str| word.rsplit('/').next().unwrap_or(word).to_owned();
    match words {
        [first, second, ..] if INTERPRETERS.contains(&program(first).as_str()) => {
            script_like(second)
        }
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
        ] {
            assert!(!looks_like_a_test(no, None), "{no}");
        }
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
    }
}
