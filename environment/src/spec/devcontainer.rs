//! The setup a `devcontainer.json` declares: its `onCreateCommand`,
//! `updateContentCommand` and `postCreateCommand`, in that order, as one
//! `sh -c` line.
//!
//! The file is JSON with comments and trailing commas. Rather than a
//! second parser, comments and trailing commas are blanked out byte for
//! byte (newlines kept), so serde_json's line and column still point into
//! the file as written. The commands are read by visitors whose errors say
//! which key is wrong and what it should have been; everything else in the
//! file (image, features, customisations) is skipped unread.
//!
//! A command is a string (a shell line), an array (one program's words,
//! run without a shell: each word is quoted for `sh -c`), or an object of
//! named commands, each a string or an array. The devcontainer CLI runs an
//! object's commands in parallel; here they run one after another in the
//! object's order, which needs no job control and fails at the first.
//! When there is more than one command, each string runs in its own
//! `sh -c`, as the CLI does, so one's `cd`, `exit` or trailing `# comment`
//! cannot change what the next does.

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::error::{command, utf8, DeclFile, DeclareError, DevcontainerPath, Location, Problem};

const FIELDS: [&str; 3] = [
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
];

/// The setup line a devcontainer file at `path` declares; `None` when it
/// declares no command.
pub(super) fn parse(
    path: DevcontainerPath,
    bytes: Vec<u8>,
) -> Result<Option<String>, DeclareError> {
    let file = DeclFile::Devcontainer(path);
    let text = utf8(file, bytes)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let plain = strip_comments(text).map_err(|offset| {
        DeclareError::invalid(
            file,
            text,
            offset,
            Problem::Syntax("a comment opened here is never closed".into()),
        )
    })?;
    let commands: Commands = serde_json::from_str(&plain).map_err(|error| {
        let at = Location {
            line: error.line().max(1),
            column: error.column().max(1),
        };
        let full = error.to_string();
        let suffix = format!(" at line {} column {}", error.line(), error.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
        DeclareError::Invalid {
            file,
            at,
            problem: Problem::Syntax(message),
        }
    })?;
    let steps: Vec<Step> = commands.0.into_iter().flatten().flatten().collect();
    let joined = match steps.as_slice() {
        [] => return Ok(None),
        [Step::Line(line)] => line.clone(),
        steps => steps
            .iter()
            .map(|step| match step {
                Step::Line(line) => format!("sh -c {}", quote(line)),
                Step::Argv(words) => argv(words),
            })
            .collect::<Vec<_>>()
            .join(" && "),
    };
    // Where the joined line is too long there is no one place to point
    // at; the file's start is named, with which keys to shorten.
    command(
        "onCreateCommand, updateContentCommand and postCreateCommand together",
        &joined,
    )
    .map_err(|problem| DeclareError::Invalid {
        file,
        at: Location { line: 1, column: 1 },
        problem,
    })
}

/// `text` with its comments and trailing commas replaced by spaces, byte
/// for byte, newlines kept; or the offset of a block comment never closed.
fn strip_comments(text: &str) -> Result<String, usize> {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut pending_comma = None;
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'"', _) => {
                pending_comma = None;
                i += 1;
                while i < bytes.len() {
                    match bytes[i] {
                        b'\\' => i += 2,
                        b'"' => break,
                        _ => i += 1,
                    }
                }
            }
            (b'/', Some(b'/')) => {
                let end = bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |n| i + n);
                blank(&mut out[i..end]);
                i = end;
                continue;
            }
            (b'/', Some(b'*')) => {
                let end = bytes[i + 2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map(|n| i + 2 + n + 2)
                    .ok_or(i)?;
                blank(&mut out[i..end]);
                i = end;
                continue;
            }
            (b',', _) => pending_comma = Some(i),
            (b'}' | b']', _) => {
                if let Some(comma) = pending_comma.take() {
                    out[comma] = b' ';
                }
            }
            (b, _) if b.is_ascii_whitespace() => {}
            _ => pending_comma = None,
        }
        i += 1;
    }
    // Only whole comments (from an ASCII `/` to a newline or `*/`) and
    // single commas were replaced, by ASCII: still UTF-8.
    Ok(String::from_utf8(out).expect("blanking whole comments keeps UTF-8"))
}

fn blank(bytes: &mut [u8]) {
    for b in bytes.iter_mut().filter(|b| **b != b'\n') {
        *b = b' ';
    }
}

/// `word` as one word of a `sh -c` line: as it is when it holds nothing
/// the shell treats specially, else in single quotes. `=` is quoted so
/// that a first word is never taken for an assignment.
fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn argv(words: &[String]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// One command to run: a shell line, or a program's words.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Line(String),
    Argv(Vec<String>),
}

/// The three lifecycle commands, in [`FIELDS`] order; each a list of steps
/// (an object's named commands, or one).
struct Commands([Option<Vec<Step>>; 3]);

impl<'de> Deserialize<'de> for Commands {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(CommandsVisitor)
    }
}

struct CommandsVisitor;

impl<'de> Visitor<'de> for CommandsVisitor {
    type Value = Commands;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object (the devcontainer's settings)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Commands, A::Error> {
        let mut found: [Option<Vec<Step>>; 3] = Default::default();
        let mut seen = [false; 3];
        while let Some(name) = map.next_key::<String>()? {
            let Some(index) = FIELDS.iter().position(|field| *field == name) else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            if std::mem::replace(&mut seen[index], true) {
                return Err(de::Error::custom(Problem::Duplicate { key: name }));
            }
            found[index] = map.next_value_seed(CommandSeed { key: FIELDS[index] })?;
        }
        Ok(Commands(found))
    }
}

/// Errors for a value of the wrong kind, in the words of [`Problem`].
fn wrong<E: de::Error>(key: &dyn fmt::Display, expected: &'static str, found: &'static str) -> E {
    E::custom(Problem::WrongType {
        key: key.to_string(),
        expected,
        found,
    })
}

/// The scalar kinds no command is: each an error naming the key.
macro_rules! refuse_scalars {
    () => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(wrong(&self.key, Self::EXPECTED, "a boolean"))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Err(wrong(&self.key, Self::EXPECTED, "a number"))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Err(wrong(&self.key, Self::EXPECTED, "a number"))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Err(wrong(&self.key, Self::EXPECTED, "a number"))
        }
    };
}

/// A lifecycle command: a string, an array, an object, or null (none).
#[derive(Clone, Copy)]
struct CommandSeed {
    key: &'static str,
}

impl CommandSeed {
    const EXPECTED: &'static str =
        "a command: a string (a shell line), an array of strings (a program and its arguments) or an object of named commands";
}

impl<'de> DeserializeSeed<'de> for CommandSeed {
    type Value = Option<Vec<Step>>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CommandSeed {
    type Value = Option<Vec<Step>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::EXPECTED)
    }
    refuse_scalars!();
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, line: &str) -> Result<Self::Value, E> {
        Ok(Some(
            StepSeed {
                key: self.key.into(),
            }
            .visit_str::<E>(line)?
            .into_iter()
            .collect(),
        ))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let step = StepSeed {
            key: self.key.into(),
        }
        .visit_seq(seq)?;
        Ok(Some(step.into_iter().collect()))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut steps = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let seed = StepSeed {
                key: format!("{}.{name}", self.key),
            };
            steps.extend(map.next_value_seed(seed)?);
        }
        Ok(Some(steps))
    }
}

/// One named command (or the whole of a string or array command): a
/// string or an array of strings. An empty string is no step.
struct StepSeed {
    key: String,
}

impl StepSeed {
    const EXPECTED: &'static str =
        "a string (a shell line) or an array of strings (a program and its arguments)";
}

impl<'de> DeserializeSeed<'de> for StepSeed {
    type Value = Option<Step>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StepSeed {
    type Value = Option<Step>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::EXPECTED)
    }
    refuse_scalars!();
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(wrong(&self.key, Self::EXPECTED, "null"))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(wrong(&self.key, Self::EXPECTED, "an object"))
    }
    fn visit_str<E: de::Error>(self, line: &str) -> Result<Self::Value, E> {
        Ok((!line.trim().is_empty()).then(|| Step::Line(line.to_owned())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut words = Vec::new();
        while let Some(word) = seq.next_element_seed(WordSeed {
            key: format!("{}[{}]", self.key, words.len()),
        })? {
            words.push(word);
        }
        if words.is_empty() {
            return Err(de::Error::custom(Problem::EmptyCommand { key: self.key }));
        }
        Ok(Some(Step::Argv(words)))
    }
}

/// One word of an array command.
struct WordSeed {
    key: String,
}

impl WordSeed {
    const EXPECTED: &'static str = "a string (one word of the command)";
}

impl<'de> DeserializeSeed<'de> for WordSeed {
    type Value = String;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for WordSeed {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::EXPECTED)
    }
    refuse_scalars!();
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(wrong(&self.key, Self::EXPECTED, "null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(wrong(&self.key, Self::EXPECTED, "an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(wrong(&self.key, Self::EXPECTED, "an object"))
    }
    fn visit_str<E: de::Error>(self, word: &str) -> Result<Self::Value, E> {
        Ok(word.to_owned())
    }
}

#[cfg(test)]
#[path = "devcontainer_tests.rs"]
mod tests;
