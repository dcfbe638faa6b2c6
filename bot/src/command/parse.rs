//! Finding what a comment addresses to the bot in classified lines, as
//! [`Addressed`] requests and commands.

use strsim::{damerau_levenshtein, jaro_winkler};

use super::error::{CommandError, CommandErrorKind};
use super::lex::{lex, Line, LineKind};
use super::{Addressed, Command, Subcommand, PRODUCT};

/// Characters skipped between a mention and its request: `@bot: fix it`,
/// `(@bot) fix it`.
fn is_lead_punct(c: char) -> bool {
    matches!(
        c,
        ',' | ':' | ';' | '.' | '!' | '?' | '-' | '–' | '—' | ')' | ']'
    )
}

/// Characters dropped from the end of a command word: `stop.`, `fix:`.
fn is_trail_punct(c: char) -> bool {
    matches!(c, ',' | ':' | ';' | '.' | '!' | '?')
}

/// The names the bot answers to.
struct Names {
    /// Accepted after `/`: the product prefix, and the bot's name if other.
    slash: Vec<String>,
    /// Accepted after `@`; empty if no bot username was given.
    bot: String,
}

impl Names {
    fn new(bot_username: &str) -> Self {
        let bot = bot_name(bot_username);
        let mut slash = vec![PRODUCT.to_string()];
        if !bot.is_empty() && !bot.eq_ignore_ascii_case(PRODUCT) {
            slash.push(bot.to_string());
        }
        Names {
            slash,
            bot: bot.to_string(),
        }
    }
}

/// The name to mention: `bot_username` without a leading `@` or a trailing
/// `[bot]` (GitHub Apps are `name[bot]` but mentioned as `@name`).
pub(crate) fn bot_name(bot_username: &str) -> &str {
    let bot = bot_username.trim().trim_start_matches('@');
    match bot.len().checked_sub(5) {
        Some(cut)
            if bot
                .get(cut..)
                .is_some_and(|s| s.eq_ignore_ascii_case("[bot]")) =>
        {
            &bot[..cut]
        }
        _ => bot,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Slash,
    Mention,
}

/// Where a line addresses the bot.
struct Hit {
    form: Form,
    /// Byte offset of the `/` or `@`.
    start: usize,
    /// Byte offset just after the name.
    end: usize,
    /// Canonical spelling of what was used: `/forgehand`, `@bot`, …
    prefix: String,
}

/// A word read from [`Line::shown`].
struct Word {
    start: usize,
    /// End of the whitespace-delimited token (including trailing punctuation).
    token_end: usize,
    /// The token without trailing punctuation.
    text: String,
}

pub(crate) fn parse(body: &str, bot_username: &str) -> Result<Vec<Addressed>, CommandError> {
    let names = Names::new(bot_username);
    let lines = lex(body);
    let hits: Vec<Option<Hit>> = lines.iter().map(|l| find_hit(l, &names)).collect();
    let mut commands = Vec::new();
    for (i, hit) in hits.iter().enumerate() {
        let Some(hit) = hit else { continue };
        // The paragraph goes on until a blank line, code, a quote, or a line
        // that addresses the bot itself.
        let cont: Vec<&Line<'_>> = lines[i + 1..]
            .iter()
            .zip(&hits[i + 1..])
            .take_while(|(l, h)| l.kind == LineKind::Text && h.is_none())
            .map(|(l, _)| l)
            .collect();
        commands.push(interpret(hit, &lines[i], &cont)?);
    }
    Ok(commands)
}

/// The first place where `line` addresses the bot: a `/forgehand` at its
/// start, else the first `@bot` mention in it.
fn find_hit(line: &Line<'_>, names: &Names) -> Option<Hit> {
    if line.kind != LineKind::Text {
        return None;
    }
    let m = line.masked.as_str();
    let start = m.len() - m.trim_start().len();
    if m[start..].starts_with('/') {
        for name in &names.slash {
            let end = start + 1 + name.len();
            if m.get(start + 1..end)
                .is_some_and(|s| s.eq_ignore_ascii_case(name))
                && m[end..].chars().next().is_none_or(char::is_whitespace)
            {
                let prefix = format!("/{name}");
                return Some(Hit {
                    form: Form::Slash,
                    start,
                    end,
                    prefix,
                });
            }
        }
    }
    let bot = names.bot.as_str();
    if bot.is_empty() {
        return None;
    }
    for (at, _) in m.match_indices('@') {
        let name_end = at + 1 + bot.len();
        if !boundary_before(m[..at].chars().next_back())
            || !m
                .get(at + 1..name_end)
                .is_some_and(|s| s.eq_ignore_ascii_case(bot))
        {
            continue;
        }
        let mut end = name_end;
        if m.get(end..end + 5)
            .is_some_and(|s| s.eq_ignore_ascii_case("[bot]"))
        {
            end += 5;
        }
        let mut after = m[end..].chars();
        if boundary_after(after.next(), after.next()) {
            let prefix = format!("@{bot}");
            return Some(Hit {
                form: Form::Mention,
                start: at,
                end,
                prefix,
            });
        }
    }
    None
}

/// Whether a mention may follow `prev`: not inside a word, an e-mail
/// address, a path, or after a backslash escape.
fn boundary_before(prev: Option<char>) -> bool {
    match prev {
        None => true,
        Some(c) => {
            c.is_whitespace()
                || !(c.is_alphanumeric() || matches!(c, '_' | '.' | '@' | '/' | '-' | '+' | '\\'))
        }
    }
}

/// Whether a mention may end before `next` (followed by `then`): not when
/// the name goes on (`@forgehand-ci`, `@forgehand/team`), nor before a
/// domain or possessive (`@forgehand.dev`, `@forgehand's`).
fn boundary_after(next: Option<char>, then: Option<char>) -> bool {
    match next {
        None => true,
        Some(c) if c.is_whitespace() => true,
        Some(c) if c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '@') => false,
        Some('.' | '\'' | '’') => !then.is_some_and(char::is_alphanumeric),
        Some(_) => true,
    }
}

fn interpret(hit: &Hit, line: &Line<'_>, cont: &[&Line<'_>]) -> Result<Addressed, CommandError> {
    let snippet = line.text_from(hit.start);
    let fail = |at: &Line<'_>, byte: usize, snippet: &str, kind| {
        Err(CommandError::at(at, byte, snippet, &hit.prefix, kind))
    };
    if hit.form == Form::Slash {
        let Some(word) = first_word(line, hit.end, false) else {
            return fail(
                line,
                hit.start,
                &snippet,
                CommandErrorKind::MissingSubcommand,
            );
        };
        let Some(sub) = Subcommand::from_word(&word.text) else {
            let suggestion = did_you_mean(&word.text, true);
            let kind = CommandErrorKind::UnknownSubcommand {
                word: word.text,
                suggestion,
            };
            return fail(line, word.start, &snippet, kind);
        };
        return finish(hit, sub, line, &word, cont, &snippet).map(Addressed::Command);
    }

    // A mention: the request may start on the mention's line or below it.
    let segments =
        std::iter::once((line, hit.end, true)).chain(cont.iter().map(|l| (*l, 0, false)));
    let found = segments
        .enumerate()
        .find_map(|(k, (l, from, lead))| first_word(l, from, lead).map(|w| (k, l, w)));
    let Some((k, word_line, word)) = found else {
        return fail(line, hit.start, &snippet, CommandErrorKind::EmptyMention);
    };
    let snippet = if k == 0 {
        snippet
    } else {
        format!("{} {}", snippet.trim(), word_line.text_from(0).trim())
    };
    if let Some(sub) = Subcommand::from_word(&word.text) {
        return finish(hit, sub, word_line, &word, &cont[k..], &snippet).map(Addressed::Command);
    }
    let first = line.text_from(hit.end);
    let text = join(
        first.trim_start_matches(|c: char| c.is_whitespace() || is_lead_punct(c)),
        cont,
    );
    if text.split_whitespace().count() == 1 && word.text.chars().count() >= 3 {
        // A lone near miss like `@forgehand retyr` is a typo, not a request.
        if let Some(suggestion) = did_you_mean(&word.text, false) {
            let kind = CommandErrorKind::UnknownSubcommand {
                word: word.text,
                suggestion: Some(suggestion),
            };
            return fail(word_line, word.start, &snippet, kind);
        }
    }
    Ok(Addressed::Request { text })
}

/// Builds the command for `sub`, whose word is `word` on `line`; `rest` are
/// the paragraph's following lines.
fn finish(
    hit: &Hit,
    sub: Subcommand,
    line: &Line<'_>,
    word: &Word,
    rest: &[&Line<'_>],
    snippet: &str,
) -> Result<Command, CommandError> {
    if sub.takes_instructions() {
        let text = join(&line.text_from(word.token_end), rest);
        return Ok(sub.command((!text.is_empty()).then_some(text)));
    }
    let after = &line.shown[word.token_end..];
    let trimmed = after.trim_start();
    // Leftover punctuation or emoji (`/forgehand stop !`, `go 🚀`) is fine.
    if trimmed.chars().any(char::is_alphanumeric) {
        let at = word.token_end + after.len() - trimmed.len();
        let text = line.text_from(at).trim().to_string();
        let kind = CommandErrorKind::UnexpectedArguments {
            subcommand: sub,
            text,
        };
        return Err(CommandError::at(line, at, snippet, &hit.prefix, kind));
    }
    Ok(sub.command(None))
}

/// The first word of `line` at or after byte `from`, skipping whitespace
/// (and leading punctuation if `lead`).
fn first_word(line: &Line<'_>, from: usize, lead: bool) -> Option<Word> {
    let shown = line.shown.as_str();
    let skip = shown[from..].find(|c: char| !(c.is_whitespace() || (lead && is_lead_punct(c))))?;
    let start = from + skip;
    let token_end = shown[start..]
        .find(char::is_whitespace)
        .map_or(shown.len(), |p| start + p);
    let token = &shown[start..token_end];
    let text = match token.trim_end_matches(is_trail_punct) {
        "" => token,
        text => text,
    };
    Some(Word {
        start,
        token_end,
        text: text.to_string(),
    })
}

/// `first` and the visible text of `rest`, one line each, trimmed.
fn join(first: &str, rest: &[&Line<'_>]) -> String {
    let mut parts = vec![first.trim_end().to_string()];
    parts.extend(rest.iter().map(|l| l.text_from(0).trim_end().to_string()));
    parts.join("\n").trim().to_string()
}

/// The subcommand `word` is probably a typo of. `loose` also accepts larger
/// edits and prefix-like similarity (for `/forgehand <word>`, where any word
/// is meant as a command); otherwise only one edit counts.
pub(crate) fn did_you_mean(word: &str, loose: bool) -> Option<Subcommand> {
    let word = word.to_lowercase();
    let scored = Subcommand::ALL.map(|s| {
        let name = s.name();
        (
            s,
            damerau_levenshtein(&word, name),
            jaro_winkler(&word, name),
        )
    });
    let (sub, distance, _) = *scored
        .iter()
        .min_by(|a, b| a.1.cmp(&b.1).then(b.2.total_cmp(&a.2)))?;
    let max = if loose && sub.name().len() >= 5 { 2 } else { 1 };
    if distance <= max {
        return Some(sub);
    }
    if !loose || word.chars().count() < 3 {
        return None;
    }
    let (sub, _, similarity) = *scored.iter().max_by(|a, b| a.2.total_cmp(&b.2))?;
    (similarity >= 0.88).then_some(sub)
}
