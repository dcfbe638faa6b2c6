//! Text from outside (a repository's files, the agent's commands, a
//! setup's output) in the bot's own Markdown: shown as it is, never read
//! as markup, so that it cannot close what holds it, imitate the bot's
//! own lines, mention people or load images.

fn escaped(c: char, out: &mut String) {
    out.extend(c.escape_unicode());
}

/// `s` on one line: each run of whitespace (line breaks too) becomes one
/// space, other control characters their escapes (`\u{1b}`).
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.trim().chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        if crate::is_hidden(c) {
            escaped(c, &mut out);
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max` characters of `s`, ending in `…` when cut.
pub fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// The longest run of backticks in `s`.
fn longest_backticks(s: &str) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in s.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// `s` as inline code on one line, with a fence longer than any run of
/// backticks inside it.
pub fn code(s: &str) -> String {
    let s = one_line(s);
    let longest = longest_backticks(&s);
    let fence = "`".repeat(longest + 1);
    // A space on each side keeps a backtick at either end off the fence.
    let pad = if longest > 0 { " " } else { "" };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// `text` as a fenced code block: a fence longer than any run of
/// backticks in it (nothing inside can close it), control characters but
/// line breaks and tabs escaped.
pub fn fenced(text: &str) -> String {
    let mut body = String::with_capacity(text.len());
    for c in text.chars() {
        if crate::is_hidden(c) && c != '\n' && c != '\t' {
            escaped(c, &mut body);
        } else {
            body.push(c);
        }
    }
    let fence = "`".repeat(longest_backticks(&body).max(2) + 1);
    format!("{fence}text\n{}\n{fence}\n", body.trim_end_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_code_stays_inline_and_closed() {
        assert_eq!(code("pytest -q"), "`pytest -q`");
        assert_eq!(code("echo `id`"), "`` echo `id` ``");
        assert_eq!(
            code(": x\n- `pytest`: exit 0 (host) ✅\n\n## Fake"),
            "`` : x - `pytest`: exit 0 (host) ✅ ## Fake ``",
            "a line break would end the table row or the paragraph"
        );
        assert_eq!(code("a\u{1b}]0;title\u{7}b"), "`a\\u{1b}]0;title\\u{7}b`");
        assert_eq!(code("x\u{202e}y"), "`x\\u{202e}y`");
    }

    #[test]
    fn a_fenced_block_cannot_be_closed_from_inside() {
        let text = "ok\n```\n**Forgehand**: all tests passed ✅ @maintainers\n![x](https://example.invalid/p.png)\n\u{1b}[31mred\n";
        let block = fenced(text);
        assert!(block.starts_with("````text\n"), "{block}");
        assert!(block.ends_with("\n````\n"), "{block}");
        assert_eq!(block.matches("````").count(), 2, "{block}");
        assert!(block.contains("\\u{1b}[31mred"), "{block}");
        assert!(!block.contains('\u{1b}'));
        assert_eq!(fenced("plain\n"), "```text\nplain\n```\n");
    }

    #[test]
    fn cut_counts_characters() {
        assert_eq!(cut("héllo", 3), "hél…");
        assert_eq!(cut("hé", 3), "hé");
    }
}
