//! What to declare when nothing is detected: a `.forgehand.toml` to start
//! from, shown beside "no environment: the tests were not run", from the
//! languages the tree's files are written in.

use super::{FilesError, RepoFiles};

/// Entries walked to see which languages a tree holds, at most.
const MAX_WALKED: usize = 200_000;

/// A `[environment]` table to start from for `files`' repository.
pub fn propose(files: &dyn RepoFiles) -> Result<String, FilesError> {
    let has = |suffix: &str| -> Result<bool, FilesError> {
        Ok(!files.ending_with(&[suffix], MAX_WALKED)?.is_empty())
    };
    let (packages, setup, test) = if has(".py")? {
        (
            r#"["python3-venv", "python3-pip"]"#,
            r#"python3 -m venv "$HOME/.venv" && "$HOME/.venv/bin/pip" install pytest"#,
            r#""$HOME/.venv/bin/python" -m pytest"#,
        )
    } else if has(".js")? || has(".ts")? {
        (r#"["nodejs", "npm"]"#, "npm install", "npm test")
    } else if has(".rs")? {
        (r#"["cargo"]"#, "cargo fetch", "cargo test --offline")
    } else if has(".go")? {
        (r#"["golang-go"]"#, "go mod download", "go test ./...")
    } else {
        (
            "[]",
            "# the command that installs the dependencies",
            "# the command that runs the tests",
        )
    };
    Ok(format!(
        "[environment]\npackages = {packages}\nsetup = {}\ntest = {}\n# the files the setup reads besides the manifests it finds\ninputs = []\n",
        toml_string(setup),
        toml_string(test)
    ))
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::testing::MapFiles;

    /// The proposal is a declaration that parses, for the tree's language.
    #[test]
    fn a_proposal_parses_and_fits_the_language() {
        let python = MapFiles::new().with("calc.py", "").with("setup.py", "");
        let text = propose(&python).unwrap();
        assert!(text.contains("pytest"), "{text}");
        let parsed = super::super::forgehand_toml::parse(text.into_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(parsed.packages.len(), 2);
        let other = propose(&MapFiles::new().with("main.c", "")).unwrap();
        assert!(other.contains("the command that runs the tests"), "{other}");
        assert!(super::super::forgehand_toml::parse(other.into_bytes()).is_ok());
    }
}
