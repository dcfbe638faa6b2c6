//! `.forgehand.toml`'s `[environment]` table.
//!
//! Read with a parser that keeps each key's and value's place in the file
//! (toml_edit's `ImDocument`) rather than through serde, so that every
//! error, a wrong type included, names its line and says what was
//! expected in the file's own terms ("a list of Debian package names"),
//! not in serde's.

use std::ops::Range;

use toml_edit::{ImDocument, Item, Key, TableLike, Value};

use super::error::command;
use super::error::{utf8, DeclFile, DeclareError, Problem};
use super::inputs::check_pattern;
use super::package::DebianPackage;
use super::MAX_PACKAGES;

const FILE: DeclFile = DeclFile::ForgehandToml;
const KEYS: [&str; 4] = ["packages", "setup", "test", "inputs"];
/// The most `inputs` patterns.
const MAX_PATTERNS: usize = 64;

/// What `[environment]` says, before detection or inputs are added.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Environment {
    pub packages: Vec<DebianPackage>,
    pub setup: Option<String>,
    pub test: Option<String>,
    /// `inputs`: glob patterns of files the setup sees besides the
    /// detected manifests (checked: [`check_pattern`]).
    pub inputs: Vec<String>,
}

impl Environment {
    /// Whether the table declares an environment: `inputs` alone only
    /// widens what a devcontainer's or detection's setup sees.
    pub fn declares(&self) -> bool {
        !self.packages.is_empty() || self.setup.is_some() || self.test.is_some()
    }
}

/// The `[environment]` table of a `.forgehand.toml` whose bytes are
/// `bytes`; `None` when the file has none (other tables are the file's
/// other uses, and are not looked at).
pub(super) fn parse(bytes: Vec<u8>) -> Result<Option<Environment>, DeclareError> {
    let text = utf8(FILE, bytes)?;
    let document = ImDocument::parse(text.as_str()).map_err(|error| {
        let offset = error.span().map_or(0, |span| span.start);
        // toml_edit's message spans lines ("invalid table header\nexpected
        // `.`, `]`"); the status comment wants one.
        let message = error
            .message()
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        DeclareError::invalid(FILE, &text, offset, Problem::Syntax(message))
    })?;
    let Some((key, item)) = document.as_table().get_key_value("environment") else {
        return Ok(None);
    };
    let fail = |at: Option<Range<usize>>, problem| {
        DeclareError::invalid(FILE, &text, at.map_or(0, |span| span.start), problem)
    };
    let Some(table) = item.as_table_like().filter(|_| !item.is_array_of_tables()) else {
        return Err(fail(
            item.span().or(key.span()),
            Problem::WrongType {
                key: "environment".into(),
                expected: "a table ([environment])",
                found: kind(item),
            },
        ));
    };
    reject_unknown(table, &fail)?;
    Ok(Some(Environment {
        packages: packages(table, &fail)?,
        setup: shell_line(table, "setup", &fail)?,
        test: shell_line(table, "test", &fail)?,
        inputs: patterns(table, &fail)?,
    }))
}

type Fail<'a> = dyn Fn(Option<Range<usize>>, Problem) -> DeclareError + 'a;

fn reject_unknown(table: &dyn TableLike, fail: &Fail<'_>) -> Result<(), DeclareError> {
    for (name, _) in table.iter() {
        if KEYS.contains(&name) {
            continue;
        }
        let suggestion = KEYS
            .iter()
            .copied()
            .find(|known| strsim::damerau_levenshtein(known, &name.to_lowercase()) <= 2);
        return Err(fail(
            key_span(table, name),
            Problem::UnknownKey {
                key: name.to_owned(),
                suggestion,
            },
        ));
    }
    Ok(())
}

fn packages(table: &dyn TableLike, fail: &Fail<'_>) -> Result<Vec<DebianPackage>, DeclareError> {
    const EXPECTED: &str = "a list of Debian package names";
    let Some((key, item)) = table.get_key_value("packages") else {
        return Ok(Vec::new());
    };
    let Some(array) = item.as_array() else {
        return Err(fail(
            item.span().or(key.span()),
            Problem::WrongType {
                key: "packages".into(),
                expected: EXPECTED,
                found: kind(item),
            },
        ));
    };
    if array.len() > MAX_PACKAGES {
        return Err(fail(
            array.span().or(key.span()),
            Problem::TooManyPackages {
                count: array.len(),
                max: MAX_PACKAGES,
            },
        ));
    }
    let mut packages = Vec::with_capacity(array.len());
    for (index, value) in array.iter().enumerate() {
        let at = value.span().or(array.span()).or(key.span());
        let element = format!("packages[{index}]");
        let Some(name) = value.as_str() else {
            return Err(fail(
                at,
                Problem::WrongType {
                    key: element,
                    expected: "a Debian package name (a string)",
                    found: value_kind(value),
                },
            ));
        };
        let package = DebianPackage::new(name).map_err(|error| {
            fail(
                at,
                Problem::BadPackage {
                    key: element,
                    error,
                },
            )
        })?;
        packages.push(package);
    }
    Ok(packages)
}

fn patterns(table: &dyn TableLike, fail: &Fail<'_>) -> Result<Vec<String>, DeclareError> {
    const EXPECTED: &str = "a list of glob patterns (strings)";
    let Some((key, item)) = table.get_key_value("inputs") else {
        return Ok(Vec::new());
    };
    let Some(array) = item.as_array() else {
        return Err(fail(
            item.span().or(key.span()),
            Problem::WrongType {
                key: "inputs".into(),
                expected: EXPECTED,
                found: kind(item),
            },
        ));
    };
    if array.len() > MAX_PATTERNS {
        return Err(fail(
            array.span().or(key.span()),
            Problem::BadPattern {
                key: "inputs".into(),
                why: format!(
                    "{} patterns, more than the {MAX_PATTERNS} allowed",
                    array.len()
                ),
            },
        ));
    }
    let mut patterns = Vec::with_capacity(array.len());
    for (index, value) in array.iter().enumerate() {
        let at = value.span().or(array.span()).or(key.span());
        let element = format!("inputs[{index}]");
        let Some(pattern) = value.as_str() else {
            return Err(fail(
                at,
                Problem::WrongType {
                    key: element,
                    expected: "a glob pattern (a string)",
                    found: value_kind(value),
                },
            ));
        };
        check_pattern(pattern)
            .map_err(|why| fail(at.clone(), Problem::BadPattern { key: element, why }))?;
        patterns.push(pattern.to_owned());
    }
    Ok(patterns)
}

fn shell_line(
    table: &dyn TableLike,
    name: &str,
    fail: &Fail<'_>,
) -> Result<Option<String>, DeclareError> {
    let Some((key, item)) = table.get_key_value(name) else {
        return Ok(None);
    };
    let at = item.span().or(key.span());
    let Some(line) = item.as_str() else {
        return Err(fail(
            at,
            Problem::WrongType {
                key: name.to_owned(),
                expected: "a shell command line (a string)",
                found: kind(item),
            },
        ));
    };
    command(name, line).map_err(|problem| fail(at, problem))
}

fn key_span(table: &dyn TableLike, name: &str) -> Option<Range<usize>> {
    let (key, item): (&Key, &Item) = table.get_key_value(name)?;
    key.span().or(item.span())
}

/// What a TOML item is, with its article, for "found …".
fn kind(item: &Item) -> &'static str {
    match item {
        Item::None => "nothing",
        Item::Value(value) => value_kind(value),
        Item::Table(_) => "a table",
        Item::ArrayOfTables(_) => "an array of tables",
    }
}

fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date-time",
        Value::Array(_) => "an array",
        Value::InlineTable(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::error::Location;

    fn parse_str(text: &str) -> Result<Option<Environment>, DeclareError> {
        parse(text.as_bytes().to_vec())
    }

    /// The error's line, column and message, or a panic saying what parsed.
    fn error(text: &str) -> (usize, usize, String) {
        match parse_str(text) {
            Err(error @ DeclareError::Invalid { at, .. }) => {
                let Location { line, column } = at;
                (line, column, error.to_string())
            }
            other => panic!("expected an error at a line, got {other:?}"),
        }
    }

    #[test]
    fn the_three_keys_are_read() {
        let environment = parse_str(
            "name = 'x'\n\n[environment]\npackages = [\"nodejs\", \"npm\"]\nsetup = \"npm ci\"\ntest = \"npm test\"\n\n[other]\nanything = 1\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            environment,
            Environment {
                packages: vec![
                    DebianPackage::new("nodejs").unwrap(),
                    DebianPackage::new("npm").unwrap()
                ],
                setup: Some("npm ci".into()),
                test: Some("npm test".into()),
                inputs: Vec::new(),
            }
        );
    }

    #[test]
    fn dotted_and_inline_forms_are_the_same_table() {
        let dotted = parse_str("environment.setup = \"make deps\"\n").unwrap();
        let inline = parse_str("environment = { setup = \"make deps\" }\n").unwrap();
        assert_eq!(dotted, inline);
        assert_eq!(dotted.unwrap().setup.as_deref(), Some("make deps"));
    }

    #[test]
    fn a_file_without_the_table_declares_nothing() {
        assert_eq!(parse_str("[review]\nx = 1\n").unwrap(), None);
        assert_eq!(parse_str("").unwrap(), None);
    }

    #[test]
    fn an_empty_table_declares_an_empty_environment() {
        assert_eq!(
            parse_str("[environment]\n").unwrap(),
            Some(Environment::default())
        );
        // An empty command is no command.
        assert_eq!(
            parse_str("[environment]\nsetup = \"  \"\n").unwrap(),
            Some(Environment::default())
        );
    }

    #[test]
    fn a_string_for_packages_is_an_error_at_its_line() {
        let (line, column, message) = error("# deps\n[environment]\npackages = \"nodejs\"\n");
        assert_eq!((line, column), (3, 12));
        assert_eq!(
            message,
            ".forgehand.toml, line 3, column 12: packages: expected a list of Debian package names, found a string"
        );
    }

    #[test]
    fn a_bad_element_is_an_error_at_the_element() {
        let (line, column, message) =
            error("[environment]\npackages = [\n  \"nodejs\",\n  3,\n]\n");
        assert_eq!((line, column), (4, 3));
        assert!(message
            .ends_with("packages[1]: expected a Debian package name (a string), found an integer"));
        let (line, column, message) =
            error("[environment]\npackages = [\"nodejs\", \"nodejs=18\"]\n");
        assert_eq!((line, column), (2, 23));
        assert!(
            message.contains("packages[1]: `nodejs=18` is not a Debian package name")
                && message.contains("'=' is not allowed"),
            "{message}"
        );
    }

    #[test]
    fn wrong_types_for_the_commands_name_what_was_expected() {
        let (line, column, message) = error("[environment]\nsetup = [\"npm\", \"ci\"]\n");
        assert_eq!((line, column), (2, 9));
        assert!(
            message.ends_with("setup: expected a shell command line (a string), found an array")
        );
        let (line, _, message) = error("[environment]\nsetup = 'x'\ntest = true\n");
        assert_eq!(line, 3);
        assert!(
            message.ends_with("test: expected a shell command line (a string), found a boolean")
        );
        let (line, _, message) = error("[environment]\n[environment.setup]\nx = 1\n");
        assert_eq!(line, 2);
        assert!(message.ends_with("found a table"), "{message}");
    }

    #[test]
    fn environment_that_is_not_a_table_is_an_error() {
        let (line, column, message) = error("title = 'x'\nenvironment = \"node\"\n");
        assert_eq!((line, column), (2, 15));
        assert!(message.ends_with("environment: expected a table ([environment]), found a string"));
        let (line, _, message) = error("[[environment]]\nsetup = 'x'\n");
        assert_eq!(line, 1);
        assert!(message.ends_with("found an array of tables"), "{message}");
    }

    #[test]
    fn unknown_keys_are_errors_with_a_suggestion() {
        let (line, column, message) =
            error("[environment]\nsetup = \"npm ci\"\npakages = [\"nodejs\"]\n");
        assert_eq!((line, column), (3, 1));
        assert!(
            message.ends_with("unknown key `pakages` in [environment], which has packages, setup, test and inputs (did you mean `packages`?)"),
            "{message}"
        );
        let (_, _, message) = error("[environment]\nimage = \"node:20\"\n");
        assert!(!message.contains("did you mean"), "{message}");
        let (line, _, _) = error("[environment]\nsetup = 'x'\n\n[environment.extra]\n");
        assert_eq!(line, 4);
    }

    #[test]
    fn syntax_errors_name_their_line() {
        let (line, _, message) = error("[environment]\nsetup = \"npm ci\ntest = 'x'\n");
        assert_eq!(line, 2);
        assert!(
            message.starts_with(".forgehand.toml, line 2, column"),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
        let (line, _, message) = error("[environment]\nsetup = 'a'\nsetup = 'b'\n");
        assert_eq!(line, 3);
        assert!(message.contains("duplicate key"), "{message}");
    }

    #[test]
    fn bounds_on_packages_and_commands() {
        let names: Vec<String> = (0..=MAX_PACKAGES).map(|i| format!("\"pkg{i}\"")).collect();
        let text = format!("[environment]\n\npackages = [{}]\n", names.join(", "));
        let (line, _, message) = error(&text);
        assert_eq!(line, 3);
        assert!(
            message.contains("101 packages, more than the 100 allowed"),
            "{message}"
        );
        let at_limit = format!(
            "[environment]\npackages = [{}]\n",
            names[..MAX_PACKAGES].join(", ")
        );
        assert_eq!(parse_str(&at_limit).unwrap().unwrap().packages.len(), 100);

        let long = "x".repeat(crate::spec::MAX_COMMAND_BYTES + 1);
        let (line, _, message) = error(&format!("[environment]\ntest = \"{long}\"\n"));
        assert_eq!(line, 2);
        assert!(
            message.contains("test: the command is 4097 bytes"),
            "{message}"
        );
        let (_, _, message) = error("[environment]\nsetup = \"a\\u0000b\"\n");
        assert!(message.ends_with("setup: a command cannot contain a NUL character"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let depth = 20_000;
        let text = format!(
            "[environment]\npackages = {}{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let (line, _, _) = error(&text);
        assert_eq!(line, 2);
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let (line, column, _) = error("environment = { test = \"über\", setup = 5 }\n");
        assert_eq!((line, column), (1, 40));
    }

    #[test]
    fn non_utf8_is_an_error_at_its_line() {
        let mut bytes = b"[environment]\nsetup = \"caf".to_vec();
        bytes.push(0xe9);
        bytes.extend_from_slice(b"\"\n");
        match parse(bytes) {
            Err(DeclareError::Invalid { at, problem, .. }) => {
                assert_eq!(
                    at,
                    Location {
                        line: 2,
                        column: 13
                    }
                );
                assert_eq!(problem, Problem::NotUtf8);
            }
            other => panic!("{other:?}"),
        }
    }
}
