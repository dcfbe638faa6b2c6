//! Errors written for a person: they are posted back as the bot's reply.

use std::fmt;

use super::lex::Line;
use super::Subcommand;
use forgehand_gate::markdown::code;

/// The command every error reply points at.
const HELP_POINTER: &str = "Say `/forgehand help` to see what I understand.";

/// Longest snippet of the comment quoted back in an error, in characters.
const MAX_QUOTE: usize = 60;

/// A comment addressed the bot but could not be understood.
///
/// `Display` renders a complete Markdown reply, e.g.
///
/// ```text
/// I could not understand `/forgehand retyr` (line 2, column 12): unknown command `retyr`. Did you mean `/forgehand retry`?
/// Say `/forgehand help` to see what I understand.
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    /// 1-based line of the comment where parsing failed.
    pub line: usize,
    /// 1-based column (in characters, a tab counts as one) where it failed.
    pub column: usize,
    /// The whole offending line, as written (without its line ending).
    pub line_text: String,
    /// The command as written, from its `/` or `@` on (shortened if long).
    pub snippet: String,
    /// How the command was addressed: `/forgehand`, `/<bot>` or `@<bot>`.
    pub prefix: String,
    pub kind: CommandErrorKind,
}

/// What went wrong; see [`CommandError`] for where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandErrorKind {
    /// `/forgehand` with nothing after it.
    MissingSubcommand,
    /// `/forgehand <word>` where `word` is not a command (or a lone
    /// `@bot <word>` that is a near miss of one).
    UnknownSubcommand {
        word: String,
        suggestion: Option<Subcommand>,
    },
    /// A command that takes no arguments (`retry`, `stop`, `go`, `help`)
    /// followed by more text on its line.
    UnexpectedArguments {
        subcommand: Subcommand,
        text: String,
    },
    /// `@bot` with nothing to do after it.
    EmptyMention,
}

impl CommandError {
    /// An error at byte offset `byte` of `line`.
    pub(crate) fn at(
        line: &Line<'_>,
        byte: usize,
        snippet: &str,
        prefix: &str,
        kind: CommandErrorKind,
    ) -> Self {
        CommandError {
            line: line.number,
            column: line.column(byte),
            line_text: line.raw.to_string(),
            snippet: shorten(snippet.trim()),
            prefix: prefix.to_string(),
            kind,
        }
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "I could not understand {} (line {}, column {}): ",
            code(&self.snippet),
            self.line,
            self.column
        )?;
        match &self.kind {
            CommandErrorKind::MissingSubcommand => write!(
                f,
                "a command is missing after {}. {}",
                code(&self.prefix),
                command_list()
            )?,
            CommandErrorKind::UnknownSubcommand { word, suggestion } => {
                write!(f, "unknown command {}. ", code(word))?;
                match suggestion {
                    Some(s) => write!(f, "Did you mean {}?", self.full(*s))?,
                    None => f.write_str(&command_list())?,
                }
            }
            CommandErrorKind::UnexpectedArguments { subcommand, text } => {
                write!(
                    f,
                    "{} takes nothing after it, but I found {}. Write just {}.",
                    code(subcommand.name()),
                    code(&shorten(text)),
                    self.full(*subcommand)
                )?;
                if self.prefix.starts_with('@') {
                    write!(
                        f,
                        " To ask for something in plain words, do not start with {}.",
                        code(subcommand.name())
                    )?;
                }
            }
            CommandErrorKind::EmptyMention => write!(
                f,
                "you mentioned me without saying what to do. Write your request after the mention, for example {}.",
                code(&format!("{} fix the failing test", self.prefix))
            )?,
        }
        write!(f, "\n{HELP_POINTER}")
    }
}

impl std::error::Error for CommandError {}

impl CommandError {
    /// `` `/forgehand retry` ``, with this error's prefix.
    fn full(&self, subcommand: Subcommand) -> String {
        code(&format!("{} {}", self.prefix, subcommand.name()))
    }
}

/// "The commands are `fix`, `plan`, … and `help`."
fn command_list() -> String {
    let names: Vec<String> = Subcommand::ALL.iter().map(|s| code(s.name())).collect();
    let (last, rest) = names.split_last().expect("there are subcommands");
    format!("The commands are {} and {last}.", rest.join(", "))
}

/// At most [`MAX_QUOTE`] characters of `s`, ending in `…` if cut.
fn shorten(s: &str) -> String {
    if s.chars().count() <= MAX_QUOTE {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX_QUOTE - 1).collect();
    out.push('…');
    out
}
