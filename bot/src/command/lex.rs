//! Line classification: which parts of a comment are prose that may hold a
//! command, and which are code, quotes or HTML comments that never do.
//!
//! This is a deliberately small subset of CommonMark: enough to tell a
//! command someone *wrote* from one they *showed* (in code), *quoted* or
//! *hid* (in an HTML comment).

use std::ops::Range;

/// Stands in for each byte of an inline code span in [`Line::masked`]. It is
/// not whitespace, so a code span still occupies its place in the line: a
/// `/forgehand` after `` `x` `` is not at the start of the line.
const CODE_FILL: char = '\u{1}';

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineKind {
    /// Prose: may hold a command, or continue the paragraph of one.
    Text,
    /// Nothing visible (whitespace, or only HTML comment): ends a paragraph.
    Blank,
    /// Inside (or the fence line of) a fenced or indented code block.
    Code,
    /// A block quote line (`> …`).
    Quote,
}

#[derive(Debug)]
pub(crate) struct Line<'a> {
    /// 1-based line number in the comment.
    pub number: usize,
    /// The line as written, without its `\n` or `\r\n`.
    pub raw: &'a str,
    pub kind: LineKind,
    /// `raw` with HTML comments blanked to spaces and inline code spans
    /// filled with [`CODE_FILL`]; byte offsets are the same as in `raw`.
    /// Commands are searched for here. Empty unless `kind` is `Text`.
    pub masked: String,
    /// `raw` with only HTML comments blanked to spaces; byte offsets are the
    /// same as in `raw`. Words are read from here. Empty unless `Text`.
    pub shown: String,
    /// Byte ranges of `raw` that are HTML comment, in order.
    comments: Vec<Range<usize>>,
}

impl Line<'_> {
    /// The visible text of the line from byte `start` on: `raw` without its
    /// HTML comments (inline code is kept, it is part of what was said).
    pub fn text_from(&self, start: usize) -> String {
        let mut out = String::new();
        let mut pos = start;
        for comment in &self.comments {
            if comment.end <= pos {
                continue;
            }
            if comment.start > pos {
                out.push_str(&self.raw[pos..comment.start]);
            }
            pos = comment.end;
        }
        if pos < self.raw.len() {
            out.push_str(&self.raw[pos..]);
        }
        out
    }

    /// 1-based column (in characters) of byte offset `byte`.
    pub fn column(&self, byte: usize) -> usize {
        self.raw[..byte].chars().count() + 1
    }
}

/// An open fenced code block: its fence character and length.
struct Fence {
    ch: u8,
    len: usize,
}

/// Splits `body` into classified lines (`\n` or `\r\n` separated).
pub(crate) fn lex(body: &str) -> Vec<Line<'_>> {
    let mut fence: Option<Fence> = None;
    let mut in_comment = false;
    let mut in_indented_code = false;
    let mut after_text = false;
    let mut lines = Vec::new();
    for (index, raw) in body.split('\n').enumerate() {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let mut line = Line {
            number: index + 1,
            raw,
            kind: LineKind::Code,
            masked: String::new(),
            shown: String::new(),
            comments: Vec::new(),
        };
        let mut indented_code = false;
        if let Some(open) = &fence {
            if closes(raw, open) {
                fence = None;
            }
        } else if in_comment {
            scan(&mut line, &mut in_comment);
        } else if raw.trim().is_empty() {
            line.kind = LineKind::Blank;
        } else if indent_width(raw) >= 4 && (in_indented_code || !after_text) {
            // An indented code block cannot interrupt a paragraph.
            indented_code = true;
        } else if let Some(open) = opens(raw) {
            fence = Some(open);
        } else if raw.trim_start().starts_with('>') {
            line.kind = LineKind::Quote;
        } else {
            scan(&mut line, &mut in_comment);
        }
        if indented_code {
            in_indented_code = true;
        } else if line.kind != LineKind::Blank {
            in_indented_code = false;
        }
        after_text = line.kind == LineKind::Text;
        lines.push(line);
    }
    lines
}

/// Width of the leading whitespace, with tabs stopping at multiples of 4.
fn indent_width(raw: &str) -> usize {
    let mut width = 0;
    for c in raw.chars() {
        match c {
            ' ' => width += 1,
            '\t' => width += 4 - width % 4,
            _ => break,
        }
    }
    width
}

/// An opening code fence: 3+ backticks or tildes (a backtick fence's info
/// string may not contain a backtick, or it is inline code instead).
fn opens(raw: &str) -> Option<Fence> {
    let line = raw.trim_start();
    let ch = *line.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = line.bytes().take_while(|&b| b == ch).count();
    if len < 3 || (ch == b'`' && line[len..].contains('`')) {
        return None;
    }
    Some(Fence { ch, len })
}

/// Whether `raw` closes `open`: the same character, at least as many, and
/// nothing else on the line.
fn closes(raw: &str, open: &Fence) -> bool {
    let line = raw.trim_start();
    let len = line.bytes().take_while(|&b| b == open.ch).count();
    len >= open.len && line[len..].trim().is_empty()
}

/// Finds inline code spans and HTML comments in a prose line, fills in its
/// `masked`, `shown`, `comments` and `kind`. `in_comment` says whether the
/// line starts inside a multi-line HTML comment, and is left saying whether
/// the next one does.
fn scan(line: &mut Line<'_>, in_comment: &mut bool) {
    let bytes = line.raw.as_bytes();
    let mut code = Vec::new();
    let mut comments = Vec::new();
    let mut i = 0;
    if *in_comment {
        match find(bytes, 0, b"-->") {
            Some(p) => {
                comments.push(0..p + 3);
                i = p + 3;
                *in_comment = false;
            }
            None => {
                comments.push(0..bytes.len());
                i = bytes.len();
            }
        }
    }
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if bytes.get(i + 1).is_some_and(u8::is_ascii_punctuation) => i += 2,
            b'`' => {
                let run = run_len(bytes, i, b'`');
                match closing_backticks(bytes, i + run, run) {
                    Some(end) => {
                        code.push(i..end);
                        i = end;
                    }
                    None => i += run,
                }
            }
            b'<' if bytes[i..].starts_with(b"<!--") => match find(bytes, i + 4, b"-->") {
                Some(p) => {
                    comments.push(i..p + 3);
                    i = p + 3;
                }
                None => {
                    comments.push(i..bytes.len());
                    *in_comment = true;
                    break;
                }
            },
            _ => i += 1,
        }
    }
    line.masked = fill(line.raw, &code, &comments);
    line.shown = fill(line.raw, &[], &comments);
    line.comments = comments;
    line.kind = if line.masked.trim().is_empty() {
        LineKind::Blank
    } else {
        LineKind::Text
    };
}

/// `raw` with comment bytes replaced by spaces and code bytes by
/// [`CODE_FILL`], one filler per byte so that offsets are unchanged.
fn fill(raw: &str, code: &[Range<usize>], comments: &[Range<usize>]) -> String {
    let inside = |ranges: &[Range<usize>], i: usize| ranges.iter().any(|r| r.contains(&i));
    let mut out = String::with_capacity(raw.len());
    for (i, c) in raw.char_indices() {
        let filler = if inside(comments, i) {
            ' '
        } else if inside(code, i) {
            CODE_FILL
        } else {
            out.push(c);
            continue;
        };
        out.extend(std::iter::repeat_n(filler, c.len_utf8()));
    }
    out
}

fn run_len(bytes: &[u8], start: usize, b: u8) -> usize {
    bytes[start..].iter().take_while(|&&x| x == b).count()
}

/// End of the first run of exactly `len` backticks at or after `from`.
fn closing_backticks(bytes: &[u8], from: usize, len: usize) -> Option<usize> {
    let mut j = from;
    while j < bytes.len() {
        if bytes[j] == b'`' {
            let run = run_len(bytes, j, b'`');
            if run == len {
                return Some(j + run);
            }
            j += run;
        } else {
            j += 1;
        }
    }
    None
}

/// Offset of the first `needle` in `bytes` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}
