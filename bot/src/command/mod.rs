//! Commands people give the bot in issue and pull-request comments.
//!
//! A pure function over the comment text: [`parse_comment`] finds every
//! command in a comment, in order, or the first mistake in one, explained
//! for a person ([`CommandError`]'s `Display` is a ready-made reply).
//!
//! # Grammar
//!
//! * `/forgehand <command> [arguments]` at the start of a line (leading
//!   whitespace allowed). `/<bot username>` works too. Case does not matter.
//! * `@<bot username>` anywhere in prose, as a real mention (not inside a
//!   word, an e-mail address, `@bot-ci`, `@bot.dev` or `@bot's`). What follows
//!   it is the request; if its first word is a command, it is that command,
//!   otherwise an [`Addressed::Request`] in plain words.
//! * Commands: `fix` and `plan` take free-text instructions; `retry`,
//!   `stop`, `go`, `allow-sensitive`, `allow-destructive` and `help` take
//!   nothing.
//! * Instructions and requests run to the end of the line and on through the
//!   following lines of the same paragraph: up to a blank line, a code block,
//!   a quote, or a line that addresses the bot itself.
//! * Ignored: fenced code blocks (```` ``` ```` / `~~~`, an unclosed fence
//!   runs to the end), indented code blocks, inline code, `>` quotes and
//!   `<!-- HTML comments -->`.

mod error;
mod lex;
mod parse;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_errors;

pub use error::{CommandError, CommandErrorKind};

/// The product's command prefix: `/forgehand …` always works, whatever the
/// bot's username is.
pub const PRODUCT: &str = "forgehand";

pub use forgehand_store::job::Command;

/// What a comment addressed to the bot says: a request in plain words, or
/// a command (the one [`Command`] type the job carries too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addressed {
    /// `@bot <free text>`: a request in plain words.
    Request { text: String },
    /// `/forgehand <command>`, or `@bot <command> …`.
    Command(Command),
}

impl Addressed {
    /// A short name for logs: the subcommand, or `request`.
    pub fn name(&self) -> &'static str {
        match self {
            Addressed::Request { .. } => "request",
            Addressed::Command(command) => Subcommand::of(command).name(),
        }
    }
}

/// The words that may follow `/forgehand`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Subcommand {
    Fix,
    Plan,
    Go,
    Stop,
    Retry,
    AllowSensitive,
    AllowDestructive,
    Help,
}

impl Subcommand {
    /// Every subcommand, in the order help lists them.
    pub const ALL: [Subcommand; 8] = [
        Subcommand::Fix,
        Subcommand::Plan,
        Subcommand::Go,
        Subcommand::Stop,
        Subcommand::Retry,
        Subcommand::AllowSensitive,
        Subcommand::AllowDestructive,
        Subcommand::Help,
    ];

    /// The word, in lower case.
    pub fn name(self) -> &'static str {
        match self {
            Subcommand::Fix => "fix",
            Subcommand::Plan => "plan",
            Subcommand::Go => "go",
            Subcommand::Stop => "stop",
            Subcommand::Retry => "retry",
            Subcommand::AllowSensitive => "allow-sensitive",
            Subcommand::AllowDestructive => "allow-destructive",
            Subcommand::Help => "help",
        }
    }

    /// The subcommand spelled `word`, ignoring case.
    pub fn from_word(word: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(word))
    }

    /// Whether free-text instructions may follow (`fix`, `plan`).
    pub fn takes_instructions(self) -> bool {
        matches!(self, Subcommand::Fix | Subcommand::Plan)
    }

    /// The word a command is given by.
    pub fn of(command: &Command) -> Self {
        match command {
            Command::Fix { .. } => Subcommand::Fix,
            Command::Plan { .. } => Subcommand::Plan,
            Command::Go => Subcommand::Go,
            Command::Stop => Subcommand::Stop,
            Command::Retry => Subcommand::Retry,
            Command::AllowSensitive => Subcommand::AllowSensitive,
            Command::AllowDestructive => Subcommand::AllowDestructive,
            Command::Help => Subcommand::Help,
        }
    }

    fn command(self, instructions: Option<String>) -> Command {
        match self {
            Subcommand::Fix => Command::Fix { instructions },
            Subcommand::Plan => Command::Plan { instructions },
            Subcommand::Go => Command::Go,
            Subcommand::Stop => Command::Stop,
            Subcommand::Retry => Command::Retry,
            Subcommand::AllowSensitive => Command::AllowSensitive,
            Subcommand::AllowDestructive => Command::AllowDestructive,
            Subcommand::Help => Command::Help,
        }
    }
}

/// Everything `body` addresses to the bot, in order; `Ok(vec![])` if it
/// addresses nothing.
///
/// `bot_username` is the bot's account name on the forge (a leading `@` and
/// a trailing `[bot]`, as GitHub Apps have, are ignored): it is what
/// `@mentions` must name, and `/<bot_username>` is accepted besides
/// `/forgehand`. If any command in the comment is malformed, the first such
/// error is returned and no command is: the person should fix the comment
/// rather than have half of it carried out.
pub fn parse_comment(body: &str, bot_username: &str) -> Result<Vec<Addressed>, CommandError> {
    parse::parse(body, bot_username)
}

/// The Markdown reply to `/forgehand help`.
pub fn help_text(bot_username: &str) -> String {
    let bot = parse::bot_name(bot_username);
    let mut out = String::from("**What I understand**\n\n");
    out.push_str("Write a command at the start of a line in a comment:\n\n");
    out.push_str("| Command | What it does |\n| --- | --- |\n");
    let rows = [
        (
            "fix [instructions]",
            "Work on this issue and open a pull request. Anything after `fix` is passed on as instructions.",
        ),
        (
            "plan [instructions]",
            "Write a plan first and wait for `go` before changing any code.",
        ),
        ("go", "Go ahead with the plan."),
        ("stop", "Stop what I am doing."),
        ("retry", "Try the last run again."),
        (
            "allow-sensitive",
            "Let my changes to CI definitions, agent instructions, CODEOWNERS and build entry points be pushed (they are always listed in the pull request).",
        ),
        (
            "allow-destructive",
            "Let my change be pushed though it deletes or empties most of the repository's files.",
        ),
        ("help", "Show this message."),
    ];
    for (command, what) in rows {
        out.push_str(&format!("| `/{PRODUCT} {command}` | {what} |\n"));
    }
    out.push('\n');
    if !bot.is_empty() {
        if !bot.eq_ignore_ascii_case(PRODUCT) {
            out.push_str(&format!("`/{bot}` works as well as `/{PRODUCT}`. "));
        }
        out.push_str(&format!(
            "You can also mention me: `@{bot} fix the flaky login test`, or ask in plain words, \
             like `@{bot} why does the build fail on Windows?`\n\n"
        ));
    }
    out.push_str(
        "Instructions may go on over the next lines, up to a blank line. \
         Commands inside code blocks, `inline code`, `>` quotes and HTML comments are ignored, \
         and case does not matter.\n",
    );
    out
}
