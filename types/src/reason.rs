//! Why a job or a `forgehand run` stopped short: one type from the agent
//! and the gate to the status comment, the job's record and the API, and
//! the only place its codes are spelled (`docs/configuration.md` lists
//! them; a test keeps the two equal).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why the gate refused, most serious first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    Tamper,
    TooLarge,
    Secret,
    Sensitive,
    Destructive,
}

impl RefusalReason {
    /// The command with which a maintainer allows it, when one can.
    pub fn command(self) -> Option<&'static str> {
        match self {
            RefusalReason::Sensitive => Some("allow-sensitive"),
            RefusalReason::Destructive => Some("allow-destructive"),
            RefusalReason::Tamper | RefusalReason::TooLarge | RefusalReason::Secret => None,
        }
    }

    /// What the gate found, as a clause.
    pub fn what(self) -> &'static str {
        match self {
            RefusalReason::Tamper => {
                "the agent changed git's own files (hooks, config, info or alternates)"
            }
            RefusalReason::TooLarge => "the working tree holds more than the host reads",
            RefusalReason::Secret => "the changes contain what looks like a secret",
            RefusalReason::Sensitive => {
                "the changes touch files that are not ordinary source, tests or documentation"
            }
            RefusalReason::Destructive => "the change removes most of the repository",
        }
    }

    /// The job's reason code.
    pub fn code(self) -> &'static str {
        match self {
            RefusalReason::Tamper => "tamper",
            RefusalReason::TooLarge => "too_large",
            RefusalReason::Secret => "secret",
            RefusalReason::Sensitive => "sensitive",
            RefusalReason::Destructive => "destructive",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A budget the host enforces ran out.
    Budget(Budget),
    /// The model's API failed, or answered what cannot be used.
    ModelError,
    /// The gate refused the agent's changes.
    Gate(RefusalReason),
    /// The repository's environment could not be had.
    Environment(EnvProblem),
    /// The agent finished without changing anything.
    NoChanges,
    /// The request may not be carried out (a branch not the bot's).
    Denied,
    /// The forge's API or git transport failed.
    ForgeError,
    /// Forgehand's own machinery (the sandbox, the disk, a task).
    Infra,
    /// Stopped on request (`/forgehand stop`, a newer request, shutdown).
    Stopped,
    /// What `forgehand run` was given cannot be worked on (not a
    /// repository, no commit, a detached HEAD, uncommitted changes).
    Input,
}

/// What went wrong with a repository's environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EnvProblem {
    /// Its declaration (`.forgehand.toml`, a devcontainer) is wrong.
    Declaration,
    /// Its setup (its packages, its command) failed.
    Setup,
    /// Its setup made more files than an environment may hold.
    TooLarge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Budget {
    Turns,
    ToolCalls,
    Time,
    InputTokens,
    OutputTokens,
    Dollars,
}

impl Budget {
    pub const ALL: [Budget; 6] = [
        Budget::Turns,
        Budget::ToolCalls,
        Budget::Time,
        Budget::InputTokens,
        Budget::OutputTokens,
        Budget::Dollars,
    ];

    /// What running out of it means, for the person reading the status.
    pub fn explain(self) -> &'static str {
        match self {
            Budget::Turns => "the agent used all its turns (agent.max_turns)",
            Budget::ToolCalls => "the agent used all its tool calls (agent.max_tool_calls)",
            Budget::Time => "the agent ran out of time (agent.max_seconds)",
            Budget::InputTokens => {
                "the agent read as many tokens as allowed (agent.max_input_tokens)"
            }
            Budget::OutputTokens => {
                "the agent wrote as many tokens as allowed (agent.max_output_tokens)"
            }
            Budget::Dollars => "the agent spent its budget (agent.max_dollars)",
        }
    }
}

impl Reason {
    /// Every reason, in the order the docs list them.
    pub fn all() -> Vec<Reason> {
        let mut all: Vec<Reason> = Budget::ALL.into_iter().map(Reason::Budget).collect();
        all.push(Reason::ModelError);
        all.extend(
            [
                RefusalReason::Tamper,
                RefusalReason::TooLarge,
                RefusalReason::Secret,
                RefusalReason::Sensitive,
                RefusalReason::Destructive,
            ]
            .map(Reason::Gate),
        );
        all.extend([
            Reason::Environment(EnvProblem::Declaration),
            Reason::Environment(EnvProblem::Setup),
            Reason::Environment(EnvProblem::TooLarge),
            Reason::NoChanges,
            Reason::Denied,
            Reason::ForgeError,
            Reason::Infra,
            Reason::Stopped,
            Reason::Input,
        ]);
        all
    }

    /// The code the job's record, the API and `forgehand run --json` show.
    pub fn code(self) -> &'static str {
        match self {
            Reason::Budget(Budget::Turns) => "budget:turns",
            Reason::Budget(Budget::ToolCalls) => "budget:tool_calls",
            Reason::Budget(Budget::Time) => "budget:time",
            Reason::Budget(Budget::InputTokens) => "budget:input_tokens",
            Reason::Budget(Budget::OutputTokens) => "budget:output_tokens",
            Reason::Budget(Budget::Dollars) => "budget:dollars",
            Reason::ModelError => "model_error",
            Reason::Gate(refusal) => refusal.code(),
            Reason::Environment(EnvProblem::Declaration) => "environment:declaration",
            Reason::Environment(EnvProblem::Setup) => "environment:setup",
            Reason::Environment(EnvProblem::TooLarge) => "environment:too_large",
            Reason::NoChanges => "no_changes",
            Reason::Denied => "denied",
            Reason::ForgeError => "forge_error",
            Reason::Infra => "infra",
            Reason::Stopped => "stopped",
            Reason::Input => "input",
        }
    }

    /// Whether the status comment shows the lines under the first (the
    /// gate's findings, the setup's last output).
    pub fn shows_findings(self) -> bool {
        matches!(self, Reason::Gate(_) | Reason::Environment(_))
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code())
    }
}

impl std::str::FromStr for Reason {
    type Err = String;

    fn from_str(code: &str) -> Result<Self, Self::Err> {
        Reason::all()
            .into_iter()
            .find(|r| r.code() == code)
            .ok_or_else(|| format!("unknown reason code `{code}`"))
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        code.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_reads_back_as_its_reason() {
        for reason in Reason::all() {
            let json = serde_json::to_string(&reason).unwrap();
            assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), reason);
        }
        assert!(serde_json::from_str::<Reason>("\"nonsense\"").is_err());
    }

    #[test]
    fn codes_are_distinct() {
        let codes: std::collections::BTreeSet<&str> =
            Reason::all().into_iter().map(Reason::code).collect();
        assert_eq!(codes.len(), Reason::all().len());
    }

    #[test]
    fn the_documented_codes_are_these_codes() {
        let docs = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/configuration.md"
        ))
        .unwrap();
        let table = docs
            .split_once("<!-- reasons: start -->\n")
            .and_then(|(_, rest)| rest.split_once("<!-- reasons: end -->"))
            .map(|(table, _)| table)
            .expect("docs/configuration.md lists the reason codes between its markers");
        let documented: Vec<&str> = table
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once('`'))
            .map(|(code, _)| code)
            .collect();
        let coded: Vec<&str> = Reason::all().into_iter().map(Reason::code).collect();
        assert_eq!(documented, coded);
    }
}
