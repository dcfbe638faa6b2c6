//! The errors a declaration can have, worded for the person who wrote the
//! file: they are shown in the status comment, so each names the file, the
//! line and column, and what was expected there.

use std::fmt;

use super::package::PackageNameError;
use forgehand_text::one_line;
use serde::{Deserialize, Serialize};

/// Reading the base commit's files failed. A path may be one the setup
/// command names (a lockfile it reads), the repository's text: shown on
/// one line, escaped.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The file is larger than the reader's bound; it was not read whole.
    #[error("{} is larger than {max} bytes", one_line(path))]
    TooLarge { path: String, max: u64 },
    /// The tree has more entries than a walk of it visits.
    #[error("the base commit has more than {max} entries")]
    TooManyEntries { max: usize },
    /// `[environment] inputs` matches more files than a view holds.
    #[error(
        "the environment's inputs are more than {max} files: to set up over the whole tree, say `inputs = [\"**\"]`"
    )]
    TooManyInputs { max: usize },
    /// The files could not be read (the git tree is unreadable, say).
    #[error("reading {}: {source}", one_line(path))]
    Read {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The file a declaration came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclFile {
    ForgehandToml,
    Devcontainer(DevcontainerPath),
}

impl DeclFile {
    pub fn path(self) -> &'static str {
        match self {
            DeclFile::ForgehandToml => ".forgehand.toml",
            DeclFile::Devcontainer(path) => path.as_str(),
        }
    }
}

impl fmt::Display for DeclFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.path())
    }
}

/// A place in a file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl Location {
    /// The place of byte `offset` in `text` (clamped to its end, and to a
    /// character boundary).
    pub fn of_offset(text: &str, offset: usize) -> Location {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Location {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

/// What is wrong at a [`Location`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file does not parse; the parser's own words.
    Syntax(String),
    /// The file is not UTF-8 from this point.
    NotUtf8,
    /// A value of the wrong kind. `key` is where it sits (`packages[2]`).
    WrongType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    /// A key `[environment]` does not have.
    UnknownKey {
        key: String,
        suggestion: Option<&'static str>,
    },
    /// A key given twice.
    Duplicate {
        key: String,
    },
    /// A package name outside Debian's grammar.
    BadPackage {
        key: String,
        error: PackageNameError,
    },
    TooManyPackages {
        count: usize,
        max: usize,
    },
    TooLong {
        key: String,
        len: usize,
        max: usize,
    },
    /// A NUL byte cannot be passed to `sh -c`.
    Nul {
        key: String,
    },
    /// A pattern of `inputs` that cannot be used.
    BadPattern {
        key: String,
        why: String,
    },
    /// An array command with no words.
    EmptyCommand {
        key: String,
    },
}

impl fmt::Display for Problem {
    // Keys, names and the parsers' messages (which quote keys) are the
    // repository's text: shown on one line, their controls escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Syntax(message) => f.write_str(&one_line(message)),
            Problem::NotUtf8 => f.write_str("the file is not UTF-8 text from here on"),
            Problem::WrongType {
                key,
                expected,
                found,
            } => write!(f, "{}: expected {expected}, found {found}", one_line(key)),
            Problem::UnknownKey { key, suggestion } => {
                write!(
                    f,
                    "unknown key `{}` in [environment], which has packages, setup, test and inputs",
                    one_line(key)
                )?;
                match suggestion {
                    Some(known) => write!(f, " (did you mean `{known}`?)"),
                    None => Ok(()),
                }
            }
            Problem::Duplicate { key } => write!(f, "{} is given twice", one_line(key)),
            Problem::BadPackage { key, error } => {
                write!(f, "{}: {}", one_line(key), one_line(&error.to_string()))
            }
            Problem::TooManyPackages { count, max } => write!(
                f,
                "packages: {count} packages, more than the {max} allowed; a repository needing more should use a setup command"
            ),
            Problem::TooLong { key, len, max } => write!(
                f,
                "{}: the command is {len} bytes, more than the {max} allowed; put a longer one in a script and run that",
                one_line(key)
            ),
            Problem::Nul { key } => write!(
                f,
                "{}: a command cannot contain a NUL character",
                one_line(key)
            ),
            Problem::BadPattern { key, why } => {
                write!(f, "{}: {}", one_line(key), one_line(why))
            }
            Problem::EmptyCommand { key } => write!(
                f,
                "{}: expected a command's words, found an empty array",
                one_line(key)
            ),
        }
    }
}

/// Why a repository's declaration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DeclareError {
    /// Something in the file is wrong, at a line.
    #[error("{file}, line {}, column {}: {problem}", at.line, at.column)]
    Invalid {
        file: DeclFile,
        at: Location,
        problem: Problem,
    },
    /// The file is over its bound; it was not read.
    #[error("{file} is larger than {max} bytes, the most Forgehand reads of it")]
    TooLarge { file: DeclFile, max: u64 },
    /// The repository's files could not be read.
    #[error(transparent)]
    Files(FilesError),
}

impl DeclareError {
    pub(crate) fn invalid(file: DeclFile, text: &str, offset: usize, problem: Problem) -> Self {
        DeclareError::Invalid {
            file,
            at: Location::of_offset(text, offset),
            problem,
        }
    }

    /// The error of a declaration file that could not be read.
    pub(crate) fn reading(file: DeclFile, error: FilesError) -> Self {
        match error {
            FilesError::TooLarge { max, .. } => DeclareError::TooLarge { file, max },
            other => DeclareError::Files(other),
        }
    }
}

/// A declaration file's text, or the error naming where it stops being
/// UTF-8.
pub(crate) fn utf8(file: DeclFile, bytes: Vec<u8>) -> Result<String, DeclareError> {
    String::from_utf8(bytes).map_err(|error| {
        let valid = error.utf8_error().valid_up_to();
        let bytes = error.into_bytes();
        // The valid prefix is text; the location is counted in it.
        let text = String::from_utf8_lossy(&bytes[..valid]);
        DeclareError::invalid(file, &text, valid, Problem::NotUtf8)
    })
}

/// The devcontainer file read: the folder form wins, as with the
/// devcontainer CLI. Configurations in sub-folders of `.devcontainer/`
/// (one of several to choose from) are not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DevcontainerPath {
    /// `.devcontainer/devcontainer.json`
    Folder,
    /// `.devcontainer.json`
    Root,
}

impl DevcontainerPath {
    pub fn as_str(self) -> &'static str {
        match self {
            DevcontainerPath::Folder => ".devcontainer/devcontainer.json",
            DevcontainerPath::Root => ".devcontainer.json",
        }
    }
}

/// A command line as given for `key`: `None` when blank, else checked
/// against what `sh -c` and a status comment can take.
pub(super) fn command(key: &str, line: &str) -> Result<Option<String>, Problem> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    if line.len() > super::MAX_COMMAND_BYTES {
        return Err(Problem::TooLong {
            key: key.to_owned(),
            len: line.len(),
            max: super::MAX_COMMAND_BYTES,
        });
    }
    if line.contains('\0') {
        return Err(Problem::Nul {
            key: key.to_owned(),
        });
    }
    Ok(Some(line.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Red-team F3: a key is the repository's text; shown in an error it
    /// stays on one line and carries no escape sequence.
    #[test]
    fn keys_and_parser_messages_are_shown_on_one_line_with_controls_escaped() {
        let hostile = "bogus\u{1b}[31mRED\n## Testing\n- `npm test`: passed\u{202e}";
        let escaped = "bogus\\u{1b}[31mRED\\n## Testing\\n- `npm test`: passed\\u{202e}";
        let problems = [
            Problem::UnknownKey {
                key: hostile.into(),
                suggestion: None,
            },
            Problem::Duplicate {
                key: hostile.into(),
            },
            Problem::WrongType {
                key: hostile.into(),
                expected: "a string",
                found: "an integer",
            },
            Problem::TooLong {
                key: hostile.into(),
                len: 9,
                max: 8,
            },
            Problem::Nul {
                key: hostile.into(),
            },
            Problem::EmptyCommand {
                key: hostile.into(),
            },
            Problem::BadPackage {
                key: "packages[0]".into(),
                error: PackageNameError::BadStart {
                    name: hostile.into(),
                },
            },
            Problem::Syntax(format!("duplicate key `{hostile}` in table `environment`")),
        ];
        for error in [
            FilesError::TooLarge {
                path: hostile.into(),
                max: 1,
            },
            FilesError::Read {
                path: hostile.into(),
                source: "unreadable".into(),
            },
        ] {
            let shown = DeclareError::Files(error).to_string();
            assert!(shown.contains(escaped), "{shown:?}");
        }
        for problem in problems {
            let shown = DeclareError::Invalid {
                file: DeclFile::ForgehandToml,
                at: Location { line: 2, column: 1 },
                problem,
            }
            .to_string();
            assert!(shown.contains(escaped), "{shown:?}");
            assert!(
                !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
                "{shown:?}"
            );
        }
    }
}
