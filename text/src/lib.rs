//! Text from outside made safe to show: what a repository's setup
//! printed, the names in its declaration, the agent's diff and words reach
//! the operator's terminal (`forgehand env build`, `forgehand run`), the
//! log and the bot's Markdown. A terminal obeys escape sequences (a title set, the screen
//! cleared, a line rewritten by a carriage return) and a bidirectional
//! control reorders what a reader sees; none of them may pass raw.
//!
//! Both functions replace such a character with a visible escape in
//! Rust's form (`\u{1b}`, `\r`), so what was there can still be read.

pub mod markdown;

use std::borrow::Cow;

/// `text` with every control character escaped but the line breaks and
/// tabs that make output readable: C0 controls (a carriage return too,
/// unless it ends a line as `\r\n`, which becomes `\n`), DEL, the C1
/// controls and the Unicode bidirectional controls ([`is_hidden`]).
pub fn printable(text: &str) -> Cow<'_, str> {
    escaped(text, |c| !matches!(c, '\n' | '\t') && is_hidden(c), true)
}

/// `text` on one line: every control character escaped, line breaks and
/// tabs included. For names (a key, a path) shown inside a sentence.
///
/// A backslash is left as it is, so that escaping twice (a parser's
/// message quoting a problem already shown) is
/// escaping once; a name that spells `\n` out reads like one holding a
/// line break, which is harmless once neither can break the line.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escaped(text, is_hidden, false)
}

/// Whether `c` changes how a terminal or a reader sees the text around
/// it, and so is shown as its escape: C0, DEL and C1 controls
/// (`char::is_control`); every format character (Unicode's category Cf:
/// the bidirectional embeddings, overrides, isolates and marks that
/// reorder a line, the zero-width spaces and joiners that hide text or
/// make two names look alike, the byte-order mark, tags); the line and
/// paragraph separators (U+2028, U+2029), which some viewers break a line
/// at.
pub fn is_hidden(c: char) -> bool {
    c.is_control() || is_format(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Unicode's format characters (general category Cf), as of Unicode 15.
fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

fn escaped(text: &str, escape: impl Fn(char) -> bool, crlf_is_newline: bool) -> Cow<'_, str> {
    if !text.chars().any(&escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if crlf_is_newline && c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A path as the host writes it in keys, findings and comments: the
/// agent chose its bytes, so control characters and bytes that are not
/// UTF-8 are escaped (`\n`, `\u{1b}`, `\xff`), and so is `\` itself: no
/// two paths look alike, and none breaks a line of a report.
pub fn shown_path(rel: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in rel.as_os_str().as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' || is_hidden(c) {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_keeps_lines_and_tabs_and_escapes_every_other_control() {
        let raw = "ok\tdone\n\u{1b}]0;PWNED-TITLE\u{7}\u{1b}[31mRED\nhide\rshown\r\n\
                   nul\0 del\u{7f} c1\u{9b}2J \u{202e}txt.exe\u{2066}x\u{2069} é ✅\n";
        let shown = printable(raw);
        assert_eq!(
            shown,
            "ok\tdone\n\\u{1b}]0;PWNED-TITLE\\u{7}\\u{1b}[31mRED\nhide\\rshown\n\
             nul\\u{0} del\\u{7f} c1\\u{9b}2J \\u{202e}txt.exe\\u{2066}x\\u{2069} é ✅\n"
        );
        assert!(!shown
            .chars()
            .any(|c| c != '\n' && c != '\t' && is_hidden(c)));
        // Plain text is not copied.
        assert!(matches!(
            printable("npm ci\nadded 3 packages\n"),
            Cow::Borrowed(_)
        ));
        // A backslash in output is output's own (a Windows path, a regex).
        assert_eq!(printable("C:\\x \\u{1b}"), "C:\\x \\u{1b}");
    }

    /// Red-team round 3, M4: the bidirectional marks and the Unicode line
    /// separators passed raw.
    #[test]
    fn bidi_marks_and_unicode_line_separators_are_escaped() {
        let raw = "a\u{200e}b\u{200f}c\u{61c}d\u{2028}e\u{2029}f";
        let shown = "a\\u{200e}b\\u{200f}c\\u{61c}d\\u{2028}e\\u{2029}f";
        assert_eq!(printable(raw), shown);
        assert_eq!(one_line(raw), shown);
        // Red-team round 4, F4: the format characters that hide text.
        let hidden =
            "z\u{200b}w\u{200d}j\u{2060}\u{206a}\u{feff}\u{fff9}\u{e0001}\u{e0041}\u{180e}\u{ad}";
        assert_eq!(
            printable(hidden),
            "z\\u{200b}w\\u{200d}j\\u{2060}\\u{206a}\\u{feff}\\u{fff9}\\u{e0001}\\u{e0041}\\u{180e}\\u{ad}"
        );
        // Letters and symbols of every script stay as they are.
        assert_eq!(printable("é ✅ 日本 עברית"), "é ✅ 日本 עברית");
    }

    #[test]
    fn one_line_escapes_line_breaks_and_tabs_too_and_twice_is_once() {
        let key = "bogus\u{1b}[31mRED\n## Testing\t\r\u{202e}";
        let shown = one_line(key);
        assert_eq!(shown, "bogus\\u{1b}[31mRED\\n## Testing\\t\\r\\u{202e}");
        assert!(!shown.chars().any(is_hidden));
        assert_eq!(one_line(&shown), shown);
        assert_eq!(one_line("packages"), "packages");
    }
}
