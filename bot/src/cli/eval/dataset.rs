//! A dataset in SWE-bench's format: one JSON object per line. Every line
//! is read and checked before any work starts, so a typo on the
//! hundredth line costs nothing.

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Deserializer};

/// The command a row's tests run with when it names none.
pub const DEFAULT_TEST_COMMAND: &str = "python3 -m pytest {tests}";

/// One instance.
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    pub instance_id: String,
    /// A local path (absolute, or relative to the dataset's file), a git
    /// URL, or SWE-bench's `owner/name`.
    pub repo: String,
    pub base_commit: String,
    pub problem_statement: String,
    /// The gold patch (`--patch gold`).
    #[serde(default)]
    pub patch: String,
    /// Applied over whatever is scored, after the files it touches are
    /// put back as the base has them.
    pub test_patch: String,
    #[serde(rename = "FAIL_TO_PASS", deserialize_with = "test_ids")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS", deserialize_with = "test_ids", default)]
    pub pass_to_pass: Vec<String>,
    /// `{tests}` is replaced by the test ids, each quoted for the shell.
    #[serde(default)]
    pub test_command: Option<String>,
    /// A `.forgehand.toml` `[environment]` table.
    #[serde(default)]
    pub environment: Option<toml::Table>,
}

impl Row {
    /// The shell command that runs `FAIL_TO_PASS` and `PASS_TO_PASS`.
    pub fn test_command(&self) -> String {
        let ids: Vec<String> = self
            .fail_to_pass
            .iter()
            .chain(&self.pass_to_pass)
            .map(|id| shell_quote(id))
            .collect();
        self.test_command
            .as_deref()
            .unwrap_or(DEFAULT_TEST_COMMAND)
            .replace("{tests}", &ids.join(" "))
    }
}

/// SWE-bench distributes its test lists as JSON-encoded strings; other
/// datasets write lists.
fn test_ids<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Ids {
        List(Vec<String>),
        Encoded(String),
    }
    match Ids::deserialize(deserializer)? {
        Ids::List(ids) => Ok(ids),
        Ids::Encoded(text) => serde_json::from_str(&text)
            .map_err(|e| serde::de::Error::custom(format!("a JSON-encoded list of test ids: {e}"))),
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("reading the dataset {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Row {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{0}: no instance in it")]
    Empty(String),
}

/// Every row of the dataset at `path`, checked.
pub fn read(path: &Path) -> Result<Vec<Row>, DatasetError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| DatasetError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&text, &shown)
}

pub fn parse(text: &str, shown: &str) -> Result<Vec<Row>, DatasetError> {
    let mut rows = Vec::new();
    let mut seen = HashSet::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let problem = |message: String| DatasetError::Row {
            path: shown.to_owned(),
            line: n + 1,
            message,
        };
        let row: Row = serde_json::from_str(line).map_err(|e| problem(e.to_string()))?;
        check(&row).map_err(problem)?;
        if !seen.insert(row.instance_id.clone()) {
            return Err(problem(format!(
                "instance_id `{}` is there twice",
                row.instance_id
            )));
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(DatasetError::Empty(shown.to_owned()));
    }
    Ok(rows)
}

fn check(row: &Row) -> Result<(), String> {
    let id = &row.instance_id;
    if id.is_empty() || id.chars().count() > 200 || id.chars().any(|c| c.is_control() || c == '/') {
        return Err(format!(
            "instance_id `{}`: 1 to 200 characters, no `/` or control characters",
            id.escape_debug()
        ));
    }
    let hex = |s: &str| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(&row.base_commit) {
        return Err(format!(
            "{id}: base_commit `{}` is not a commit id (40 hex digits)",
            row.base_commit.escape_debug()
        ));
    }
    if row.fail_to_pass.is_empty() {
        return Err(format!(
            "{id}: FAIL_TO_PASS is empty: nothing would show a fix"
        ));
    }
    if row.test_patch.trim().is_empty() {
        return Err(format!("{id}: test_patch is empty"));
    }
    if let Some(command) = &row.test_command {
        if !command.contains("{tests}") {
            return Err(format!(
                "{id}: test_command has no `{{tests}}` for the test ids"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(extra: &str) -> String {
        format!(
            r#"{{"instance_id":"a-1","repo":"owner/name","base_commit":"{}","problem_statement":"p","patch":"","test_patch":"diff","FAIL_TO_PASS":"[\"t.py::test_a\"]","PASS_TO_PASS":["t.py::test_b"]{extra}}}"#,
            "a".repeat(40)
        )
    }

    #[test]
    fn test_lists_are_read_as_lists_and_as_encoded_strings() {
        let rows = parse(&line(""), "d.jsonl").unwrap();
        assert_eq!(rows[0].fail_to_pass, ["t.py::test_a"]);
        assert_eq!(rows[0].pass_to_pass, ["t.py::test_b"]);
        assert_eq!(
            rows[0].test_command(),
            "python3 -m pytest 't.py::test_a' 't.py::test_b'"
        );
    }

    #[test]
    fn a_test_id_cannot_escape_its_quotes() {
        let mut row = parse(&line(""), "d").unwrap().remove(0);
        row.fail_to_pass = vec!["x'; touch /tmp/owned; '".into()];
        row.pass_to_pass.clear();
        assert_eq!(
            row.test_command(),
            r"python3 -m pytest 'x'\''; touch /tmp/owned; '\'''"
        );
    }

    #[test]
    fn the_environment_is_a_table_and_the_command_takes_the_ids() {
        let rows = parse(
            &line(r#","environment":{"setup":"make"},"test_command":"run {tests} -q""#),
            "d",
        )
        .unwrap();
        assert_eq!(
            rows[0].environment.as_ref().unwrap()["setup"].as_str(),
            Some("make")
        );
        assert_eq!(
            rows[0].test_command(),
            "run 't.py::test_a' 't.py::test_b' -q"
        );
    }

    #[test]
    fn bad_rows_are_refused_with_their_line() {
        let text = format!("{}\n\n{}\n", line(""), line(""));
        let error = parse(&text, "d.jsonl").unwrap_err().to_string();
        assert_eq!(error, "d.jsonl, line 3: instance_id `a-1` is there twice");
        let error = parse(&line("").replace(&"a".repeat(40), "main"), "d")
            .unwrap_err()
            .to_string();
        assert!(error.contains("line 1: a-1: base_commit `main`"), "{error}");
        let error = parse(&line(r#","test_command":"pytest""#), "d")
            .unwrap_err()
            .to_string();
        assert!(error.contains("no `{tests}`"), "{error}");
        let error = parse("{\"instance_id\": 3}", "d").unwrap_err().to_string();
        assert!(error.starts_with("d, line 1: invalid type"), "{error}");
        assert_eq!(
            parse("\n", "d").unwrap_err().to_string(),
            "d: no instance in it"
        );
    }
}
