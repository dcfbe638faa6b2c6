//! Documentation that a documentation builder runs as code. Docusaurus
//! reads `.md` as MDX (`import`/`export` lines and `{…}` expressions run
//! in Node at build time), VitePress compiles each page into a Vue
//! component (`<script setup>` runs), MyST runs `{code-cell}` blocks,
//! `mkdocs-macros` renders pages through Jinja (`{{ … }}`), Sphinx runs
//! `.. ipython::`, `.. plot::` and `.. program-output::`, Asciidoctor's
//! `include::` reads any file. Red-team round 3 of issue 25 committed a
//! page running `execSync` as "documentation".
//!
//! Fail closed, by structure and by an allow-list. A line outside code is
//! plain only when it holds nothing any of those builders evaluates or
//! includes: in Markdown no brace, no HTML but a few formatting tags with
//! static attributes (and autolinks), no module line, no include marker,
//! no fence whose info string is more than a language's name, no front
//! matter but YAML or TOML; in reStructuredText (and `.txt`, which Sphinx
//! projects parse as such) no directive but the ones that only lay text
//! out; in AsciiDoc no block macro but media. A Markdown paragraph with a
//! line that is not plain is not plain as a whole (MDX's module block runs
//! to the next blank line). Fences are read as CommonMark reads them, and
//! what it would not call a fence (indented four spaces, a backtick in the
//! info string) is not code.
//!
//! The change is judged on the whole file, not on the lines it adds
//! (red-team round 4 removed the fences around an existing example and
//! made it live): the file is held when a line that is not plain lies
//! outside code in the new text more often than in the base's.

use std::collections::HashMap;

/// reStructuredText directives that only lay text out, link or render
/// what is written in them (and Sphinx's autodoc family, which imports
/// the project's own modules: source the gate already treats as code).
const PLAIN_RST_DIRECTIVES: &[&str] = &[
    "admonition",
    "attention",
    "caution",
    "danger",
    "error",
    "hint",
    "important",
    "note",
    "tip",
    "warning",
    "seealso",
    "versionadded",
    "versionchanged",
    "versionremoved",
    "deprecated",
    "code-block",
    "code",
    "sourcecode",
    "highlight",
    "image",
    "figure",
    "toctree",
    "contents",
    "index",
    "glossary",
    "rubric",
    "topic",
    "sidebar",
    "math",
    "table",
    "list-table",
    "epigraph",
    "pull-quote",
    "highlights",
    "compound",
    "container",
    "centered",
    "hlist",
    "line-block",
    "parsed-literal",
    "doctest",
    "testcode",
    "testoutput",
    "currentmodule",
    "module",
    "function",
    "class",
    "method",
    "attribute",
    "data",
    "exception",
    "decorator",
    "envvar",
    "option",
    "program",
    "describe",
    "object",
    "automodule",
    "autoclass",
    "autofunction",
    "automethod",
    "autoattribute",
    "autodata",
    "autoexception",
    "autosummary",
];

/// AsciiDoc block macros that only show media.
const PLAIN_ADOC_MACROS: &[&str] = &["image", "video", "audio", "toc"];

/// The number (from 1) of the first line of `after` outside code that
/// is not plain and was not, as often, a line outside code that is not
/// plain in `before`; `None` when there is none. `ext` is the folded
/// extension (`None`: a documentation name without one, read as
/// Markdown). A number, not the line: the reason is shown on the forge,
/// and the line is the agent's text.
pub fn runs_as_code(ext: Option<&str>, before: Option<&str>, after: &str) -> Option<usize> {
    let judge = |text: &str| -> Vec<(usize, String)> {
        let text = &normalized(text);
        match ext {
            None | Some("md" | "markdown") => markdown(text),
            Some("rst" | "txt") => rst(text),
            Some("adoc" | "asciidoc") => adoc(text),
            // Other documentation kinds are not documentation the gate
            // knows: every line counts.
            Some(_) => text
                .lines()
                .enumerate()
                .map(|(n, l)| (n + 1, l.to_owned()))
                .collect(),
        }
    };
    let mut old: HashMap<String, usize> = HashMap::new();
    for (_, line) in before.map(judge).unwrap_or_default() {
        *old.entry(line).or_default() += 1;
    }
    for (n, line) in judge(after) {
        match old.get_mut(&line) {
            Some(count) if *count > 0 => *count -= 1,
            _ => return Some(n),
        }
    }
    None
}

/// The text as the most liberal reader splits it: every character any
/// builder's parser takes for a line break (a lone CR for MDX and
/// Python-Markdown; `\x1c`–`\x1e`, NEL, U+2028 and U+2029 for docutils)
/// is one, and byte-order marks and NULs are gone (MDX and gray-matter
/// strip a leading mark: red-team round 5 hid line 1 behind one).
fn normalized(text: &str) -> String {
    text.replace("\r\n", "\n")
        .chars()
        .filter(|c| !matches!(c, '\u{feff}' | '\0'))
        .map(|c| match c {
            '\r' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => '\n',
            c => c,
        })
        .collect()
}

/// A Markdown text's lines that are not plain, outside code, numbered.
fn markdown(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    // The paragraph being read: its lines, and whether one is not plain.
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    let mut tainted = false;
    let flush =
        |paragraph: &mut Vec<(usize, &str)>, tainted: &mut bool, out: &mut Vec<(usize, String)>| {
            if *tainted {
                out.extend(paragraph.iter().map(|(n, l)| (*n, (*l).to_owned())));
            }
            paragraph.clear();
            *tainted = false;
        };
    let mut start = 0;
    // Front matter: YAML (`---`) or TOML (`+++`) is data; any other
    // language tag (`---js`) is code that front-matter readers evaluate.
    if let Some(first) = lines.first() {
        let first = first.trim_end();
        if first == "---" || first == "+++" {
            if let Some(end) = lines[1..].iter().position(|l| {
                let l = l.trim_end();
                l == first || (first == "---" && l == "...")
            }) {
                start = end + 2;
            }
        } else if first.starts_with("---") || first.starts_with("+++") {
            out.push((1, first.to_owned()));
            start = 1;
        }
    }
    for (i, line) in lines.iter().enumerate().skip(start) {
        let n = i + 1;
        if let Some((ch, len)) = fence {
            if closes(line, ch, len) {
                fence = None;
            } else if line.contains("{{") || line.contains("{%") || line.contains("{#") {
                // mkdocs-macros renders the raw page, code included.
                out.push((n, (*line).to_owned()));
            }
            continue;
        }
        // Only a fence that CommonMark cannot read otherwise makes code:
        // at the first column, at the top level, after a blank line (not
        // inside a list item, a quote or an HTML block, which may close
        // it or swallow its opener: red-team round 5). Any other fence
        // line is prose, and judged.
        let top = paragraph.is_empty();
        if let (Some((ch, len, info)), true) = (opens(line), top && !line.starts_with(' ')) {
            if !plain_info(info) {
                out.push((n, (*line).to_owned()));
            }
            fence = Some((ch, len));
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut paragraph, &mut tainted, &mut out);
            continue;
        }
        // A whole comment on a line of its own, at the top level, is an
        // HTML block that ends on that line (`<!-- prettier-ignore -->`
        // before a fence).
        let trimmed = line.trim_end();
        if paragraph.is_empty() && trimmed.starts_with("<!--") && trimmed.ends_with("-->") {
            if !plain_markdown(line) {
                out.push((n, (*line).to_owned()));
            }
            continue;
        }
        paragraph.push((n, line));
        tainted |= !plain_markdown(line);
    }
    flush(&mut paragraph, &mut tainted, &mut out);
    out
}

/// A fence CommonMark opens on `line`: at most three spaces of indent,
/// three or more backticks or tildes, and for backticks an info string
/// without one.
fn opens(line: &str) -> Option<(char, usize, &str)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let ch = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = rest.chars().take_while(|c| *c == ch).count();
    if len < 3 {
        return None;
    }
    let info = &rest[len..];
    if ch == '`' && info.contains('`') {
        return None;
    }
    Some((ch, len, info.trim()))
}

/// Whether `line` closes a fence of `len` `ch`s.
fn closes(line: &str, ch: char, len: usize) -> bool {
    let rest = line;
    let run = rest.chars().take_while(|c| *c == ch).count();
    run >= len && rest[run..].trim().is_empty()
}

/// A fence's info string is plain when it is a language's name at most
/// (`python`, `c++`, `objective-c`): attributes (`exec="on"`) and braces
/// (`{code-cell}`) are what builders act on.
fn plain_info(info: &str) -> bool {
    info.chars()
        .all(|c| c.is_ascii_alphanumeric() || "_+.#-".contains(c))
}

/// HTML tags that only format text, allowed with static attributes.
const PLAIN_TAGS: &[&str] = &[
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "caption",
    "center",
    "code",
    "dd",
    "del",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "figcaption",
    "figure",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "img",
    "ins",
    "kbd",
    "li",
    "mark",
    "ol",
    "p",
    "picture",
    "pre",
    "q",
    "s",
    "samp",
    "small",
    "source",
    "span",
    "strike",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "tt",
    "u",
    "ul",
    "var",
];

/// Whether a Markdown line outside code is plain.
fn plain_markdown(line: &str) -> bool {
    let prose = without_code_spans(line.trim_start());
    let lower = prose.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    if matches!(words.first(), Some(&("import" | "export")))
        || lower.starts_with("import{")
        || lower.starts_with("export{")
        || lower.starts_with("export*")
        || lower.starts_with("import*")
    {
        return false;
    }
    if has_entity(&prose)
        || prose.contains(['{', '}'])
        || lower.contains("--8<--")
        || lower.contains("!include")
        || lower.contains("@include")
        || lower.trim_start().starts_with("<<<")
    {
        return false;
    }
    plain_html(&prose)
}

/// Whether a line holds a character reference other than the few that
/// stand for themselves in text: `&#123;` and `&lbrace;` are braces to
/// whatever renders the HTML (VitePress compiles it as a Vue template).
fn has_entity(text: &str) -> bool {
    static ENTITY: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);?").unwrap()
    });
    const PLAIN: &[&str] = &[
        "amp", "lt", "gt", "quot", "apos", "nbsp", "mdash", "ndash", "hellip", "copy", "reg",
        "trade", "times", "middot", "laquo", "raquo", "rarr", "larr",
    ];
    ENTITY.captures_iter(text).any(|c| {
        let name = &c[1];
        name.starts_with('#') || !PLAIN.contains(&name.to_ascii_lowercase().as_str())
    })
}

/// Whether every `<` of a line starts an autolink or a formatting tag
/// whose attributes are static (no `:bind`, `@event`, `v-`, `on…`).
fn plain_html(text: &str) -> bool {
    static TAG: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"^<(/?)([A-Za-z][A-Za-z0-9]*)((?:\s+[A-Za-z][A-Za-z0-9-]*(?:\s*=\s*(?:"[^"<>]*"|'[^'<>]*'|[A-Za-z0-9_.%/-]+))?)*)\s*/?>"#,
        )
        .unwrap()
    });
    static ATTR: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\s+([A-Za-z][A-Za-z0-9-]*)").unwrap());
    static AUTOLINK: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"^<(https?://|mailto:)[^\s<>]*>").unwrap());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        let tail = &rest[at..];
        let next = tail[1..].chars().next();
        // `a < b`, `<-`, `<=`: text.
        if !next.is_some_and(|c| c.is_ascii_alphabetic() || "!?/".contains(c)) {
            rest = &tail[1..];
            continue;
        }
        if let Some(link) = AUTOLINK.find(tail) {
            rest = &tail[link.end()..];
            continue;
        }
        // A comment is inert (`<!-- prettier-ignore -->`) unless it
        // carries an include (`<!--@include: …-->`) or markup.
        if let Some(body) = tail.strip_prefix("<!--") {
            let Some(end) = body.find("-->") else {
                return false;
            };
            let inner = body[..end].to_lowercase();
            if inner.contains(['@', '<', '>']) || inner.contains("include") {
                return false;
            }
            rest = &body[end + 3..];
            continue;
        }
        let Some(tag) = TAG.captures(tail) else {
            return false;
        };
        let name = tag[2].to_lowercase();
        if !PLAIN_TAGS.contains(&name.as_str()) {
            return false;
        }
        for attr in ATTR.captures_iter(&tag[3]) {
            let attr = attr[1].to_lowercase();
            if attr.starts_with("on") || attr.starts_with("v-") {
                return false;
            }
        }
        rest = &tail[tag.get(0).unwrap().end()..];
    }
    true
}

/// A line with its inline code spans (`` `…` ``) taken out.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let after = &rest[start + ticks..];
        let closing = "`".repeat(ticks);
        match after.find(&closing) {
            Some(end) => rest = &after[end + ticks..],
            // An unclosed span is text, as Markdown reads it.
            None => {
                out.push_str(&rest[start..]);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A reStructuredText text's directive lines but the layout ones,
/// numbered. Literal blocks are not told apart: a directive in one counts
/// (what is unsure is judged).
fn rst(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let Some(rest) = trimmed.strip_prefix("..") else {
            continue;
        };
        let Some((head, _)) = rest.split_once("::") else {
            continue;
        };
        // `.. |name| image::` names a substitution: the directive is the
        // last word before `::`.
        let name = head.split_whitespace().last().unwrap_or("").to_lowercase();
        let name = name.rsplit(':').next().unwrap_or(&name);
        if name.is_empty() || !PLAIN_RST_DIRECTIVES.contains(&name) {
            out.push((i + 1, line.to_owned()));
        }
    }
    out
}

/// AsciiDoc document attributes that only lay the page out (others
/// change what is read: `:data-uri:` embeds what `image::` names).
const PLAIN_ADOC_ATTRIBUTES: &[&str] = &[
    "toc",
    "toclevels",
    "toc-title",
    "icons",
    "sectnums",
    "sectanchors",
    "sectlinks",
    "source-highlighter",
    "idprefix",
    "idseparator",
    "author",
    "email",
    "revnumber",
    "revdate",
    "revremark",
    "description",
    "keywords",
    "lang",
    "experimental",
    "nofooter",
    "notitle",
    "hide-uri-scheme",
    "linkattrs",
    "listing-caption",
    "figure-caption",
    "table-caption",
];

/// An AsciiDoc text's block macros but media, and its attribute entries
/// but layout ones, numbered.
fn adoc(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix(':') {
            let name = rest
                .split(':')
                .next()
                .unwrap_or("")
                .trim_start_matches('!')
                .trim_end_matches('!');
            if !PLAIN_ADOC_ATTRIBUTES.contains(&name.to_lowercase().as_str()) {
                out.push((i + 1, line.to_owned()));
            }
            continue;
        }
        let Some((name, _)) = line.trim_start().split_once("::") else {
            continue;
        };
        let is_macro = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if is_macro && !PLAIN_ADOC_MACROS.contains(&name.to_lowercase().as_str()) {
            out.push((i + 1, line.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(before: Option<&str>, after: &str) -> Option<usize> {
        runs_as_code(Some("md"), before, after)
    }

    #[test]
    fn markdown_that_builders_run_or_include_is_held() {
        let held = [
            "import {execSync} from 'child_process';\n",
            "export const out = execSync('id');\n",
            "export\tconst out = 1\n",
            "# Intro\n\n<script setup>\nx\n</script>\n",
            "Result: {require('fs').readFileSync('/etc/passwd')}\n",
            "{{ cycler.__init__.__globals__.os.popen('id').read() }}\n",
            "```{code-cell} python\nimport os\n```\n",
            "```python exec=\"on\"\nimport os\n```\n",
            ":::{exec}\nid\n:::\n",
            "<SCRIPT>alert(1)</SCRIPT>\n",
            "<span :title=\"process\">hi</span>\n",
            "<span v-if=\"x\">hi</span>\n",
            "<img src=x onerror=\"alert(1)\">\n",
            "<Tabs>\n",
            "<!--@include: ../.git/config-->\n",
            "<!-- include ../x -->\n",
            "<!-- unclosed\n",
            "--8<-- \".git/config\"\n",
            "<<< ../.git/config\n",
            "---js\nrequire('child_process')\n---\n# Page\n",
            // Red-team round 5: line breaks no LF marks, a byte-order
            // mark, fences a container closes or an HTML block swallows,
            // character references, Jinja inside code.
            "# A\rexport const x = 1\n",
            "# A\u{2028}export const x = 1\n",
            "\u{feff}export const x = 1\n",
            "\u{feff}---js\nx\n---\n",
            "- item\n\n  ```js\n\nexport const x = 1\n\n  ```\n",
            "<p>\n```js\n</p>\n\n<script setup>\nx\n</script>\n\n```\n",
            "&#123;&#123; x &#125;&#125;\n",
            "&lbrace;&lbrace; x &rbrace;&rbrace;\n",
            "```python\n{{ cycler.__init__ }}\n```\n",
        ];
        for text in held {
            assert!(md(None, text).is_some(), "{text:?}");
        }
        let plain = [
            "# Guide\n\nRun `pytest -k {name}` and see `{}`.\n",
            "```js\nexport const x = {a: 1};\nimport y from 'y';\n```\n",
            "~~~~\n{ \"json\": true }\n~~~~\n",
            "Use ``a `{}` b`` here.\n",
            "Plain text with <em>html</em> and <a href=\"https://x.example\">a link</a>.\n",
            "<p align=\"center\"><img src=\"logo.png\" width=\"100\"></p>\n",
            "See <https://example.com/x> and a < b.\n",
            "<!-- prettier-ignore -->\n```jsx\n<div {...x} />\n```\n",
            "---\ntitle: {weird: yaml}\n---\n# Page\n",
            "+++\ntitle = \"x\"\n+++\n# Page\n",
        ];
        for text in plain {
            assert_eq!(md(None, text), None, "{text:?}");
        }
        // What the base had outside code stays judged by the base's
        // review: an edit beside existing MDX that adds none passes.
        let base = "import X from './x';\n\n# Page\n\nText.\n";
        assert_eq!(
            md(
                Some(base),
                "import X from './x';\n\n# Page, renamed\n\nText.\n"
            ),
            None
        );
        assert_eq!(
            md(
                Some(base),
                "import X from './x';\nimport Y from 'child_process';\n\n# Page\n"
            ),
            Some(2)
        );
    }

    /// Red-team round 4, H1: whether a line is code depends on the lines
    /// around it; the whole file's structure is judged.
    #[test]
    fn changing_what_is_code_around_existing_lines_is_held() {
        let base = "# Example\n\n```mdx\nexport const data = require('child_process').execSync('id');\n```\n";
        // Deleting the fences only.
        assert!(md(
            Some(base),
            "# Example\n\nexport const data = require('child_process').execSync('id');\n"
        )
        .is_some());
        // Closing the block early.
        assert!(md(Some(base), "# Example\n\n```mdx\n```\nexport const data = require('child_process').execSync('id');\n```\n").is_some());
        // A plain line continuing an existing module block.
        let tabs = "import Tabs from '@theme/Tabs';\n\n# Page\n";
        assert_eq!(
            md(Some(tabs), "import Tabs from '@theme/Tabs';\nconst cp = require('child_process'); cp.execSync('id');\n\n# Page\n"),
            Some(2)
        );
        // What CommonMark does not call a fence is not code.
        assert!(md(None, "    ```js\n\nexport const x = 1;\n\n    ```\n").is_some());
        assert!(md(None, "```js```\nexport const x = 1;\n```\n").is_some());
        // Moving a fence without changing what is code passes.
        assert_eq!(md(Some(base), "# Example, again\n\n```mdx\nexport const data = require('child_process').execSync('id');\n```\n"), None);
    }

    #[test]
    fn rst_and_txt_directives_that_run_or_read_are_held_and_layout_is_not() {
        for ext in ["rst", "txt"] {
            for text in [
                ".. ipython:: python\n\n   import os\n",
                ".. plot::\n\n   import os\n",
                ".. program-output:: id\n",
                ".. literalinclude:: /etc/passwd\n",
                ".. include:: ../.git/config\n",
                ".. raw:: html\n\n   <script>x</script>\n",
                ".. |x| program-output:: id\n",
                ".. jupyter-execute::\n",
            ] {
                assert!(
                    runs_as_code(Some(ext), None, text).is_some(),
                    "{ext}: {text:?}"
                );
            }
            for text in [
                "Title\n=====\n\n.. note::\n\n   Careful.\n\n.. code-block:: python\n\n   import os\n",
                ".. _label:\n\n.. a comment\n\n.. autofunction:: pytest.raises\n",
                ".. |logo| image:: logo.png\n",
                ".. versionadded:: 8.0\n",
            ] {
                assert_eq!(runs_as_code(Some(ext), None, text), None, "{ext}: {text:?}");
            }
        }
        // A directive the base had, kept, is not judged again.
        let base = ".. confval:: x\n\nText.\n";
        assert_eq!(
            runs_as_code(Some("rst"), Some(base), ".. confval:: x\n\nMore text.\n"),
            None
        );
    }

    #[test]
    fn asciidoc_block_macros_other_than_media_are_held() {
        assert!(runs_as_code(Some("adoc"), None, "include::../.git/config[]\n").is_some());
        assert!(runs_as_code(
            Some("adoc"),
            None,
            ":data-uri:\n\nimage::../.git/config[]\n"
        )
        .is_some());
        assert!(runs_as_code(Some("rst"), None, "Title\r.. program-output:: id\n").is_some());
        assert_eq!(
            runs_as_code(Some("adoc"), None, "= T\n:toc:\n\nText.\n"),
            None
        );
        assert_eq!(
            runs_as_code(Some("adoc"), None, "= Title\n\nimage::logo.png[]\n"),
            None
        );
    }

    #[test]
    fn a_documentation_name_without_an_extension_is_read_as_markdown() {
        assert!(runs_as_code(None, None, "export const x = 1\n").is_some());
        assert_eq!(runs_as_code(None, None, "Read me.\n"), None);
    }
}
