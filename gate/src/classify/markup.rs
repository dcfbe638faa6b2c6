//! Documentation that a documentation builder runs as code. Docusaurus
//! reads `.md` as MDX (`import`/`export` lines and `{…}` expressions run
//! in Node at build time), VitePress compiles each page into a Vue
//! component (`<script setup>` runs), MyST runs `{code-cell}` blocks,
//! `mkdocs-macros` renders pages through Jinja (`{{ … }}`), Sphinx runs
//! `.. ipython::`, `.. plot::` and `.. program-output::`, Asciidoctor's
//! `include::` reads any file. Red-team round 3 of issue 25 committed a
//! page running `execSync` as "documentation".
//!
//! Fail closed: a line the change adds outside code is plain only when it
//! holds none of what any of those builders evaluates — no brace, no
//! script element, no module line in Markdown; in reStructuredText no
//! directive but the ones that only lay text out; in AsciiDoc no block
//! macro but media. What the base already had is judged by the base's
//! review, not held again (an edit to a page with MDX in it passes when it
//! adds none).

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

/// The number (from 1) of the first line `after` adds (not in `before`)
/// outside code that a documentation builder of the file's kind (`ext`,
/// folded) would run or read as code; `None` when every added line is
/// plain. A number, not the line: the reason is shown on the forge, and
/// the line is the agent's text.
pub fn runs_as_code(ext: &str, before: Option<&str>, after: &str) -> Option<usize> {
    let mut old: HashMap<&str, usize> = HashMap::new();
    for line in before.unwrap_or("").lines() {
        *old.entry(line).or_default() += 1;
    }
    let mut added = |line: &str| match old.get_mut(line) {
        Some(n) if *n > 0 => {
            *n -= 1;
            false
        }
        _ => true,
    };
    match ext {
        "md" | "markdown" => markdown(after, &mut added),
        "rst" => rst(after, &mut added),
        "adoc" | "asciidoc" => adoc(after, &mut added),
        _ => None,
    }
}

fn markdown(text: &str, added: &mut dyn FnMut(&str) -> bool) -> Option<usize> {
    let mut fence: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let is_added = added(line);
        let trimmed = line.trim_start();
        let marker = fence_marker(trimmed);
        if let Some(open) = &fence {
            if marker.is_some_and(|m| {
                m.starts_with(open.as_str()) && trimmed[m.len()..].trim().is_empty()
            }) {
                fence = None;
            }
            continue;
        }
        if let Some(marker) = marker {
            // A fence's info string with a brace is a directive that
            // runs (MyST's ```{code-cell}, ```{eval-rst}).
            if is_added && trimmed[marker.len()..].contains('{') {
                return Some(n + 1);
            }
            fence = Some(marker);
            continue;
        }
        if !is_added {
            continue;
        }
        let prose = without_code_spans(trimmed);
        let lower = prose.to_lowercase();
        if prose.contains(['{', '}'])
            || lower.contains("<script")
            || lower.starts_with("import ")
            || lower.starts_with("export ")
            || lower.starts_with(":::{")
        {
            return Some(n + 1);
        }
    }
    None
}

/// The fence a line opens or closes (three or more backticks or tildes).
fn fence_marker(trimmed: &str) -> Option<String> {
    let first = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run: String = trimmed.chars().take_while(|c| *c == first).collect();
    (run.len() >= 3).then_some(run)
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

fn rst(text: &str, added: &mut dyn FnMut(&str) -> bool) -> Option<usize> {
    for (n, line) in text.lines().enumerate() {
        if !added(line) {
            continue;
        }
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
            return Some(n + 1);
        }
    }
    None
}

fn adoc(text: &str, added: &mut dyn FnMut(&str) -> bool) -> Option<usize> {
    for (n, line) in text.lines().enumerate() {
        if !added(line) {
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
            return Some(n + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_that_builders_run_is_found_in_what_is_added() {
        let held = [
            "import {execSync} from 'child_process';\n",
            "export const out = execSync('id');\n",
            "# Intro\n\n<script setup>\nimport { execSync } from 'node:child_process'\n</script>\n",
            "Result: {require('fs').readFileSync('/etc/passwd')}\n",
            "{{ cycler.__init__.__globals__.os.popen('id').read() }}\n",
            "```{code-cell} python\nimport os\n```\n",
            ":::{exec}\nid\n:::\n",
            "<SCRIPT>alert(1)</SCRIPT>\n",
        ];
        for text in held {
            assert!(runs_as_code("md", None, text).is_some(), "{text:?}");
        }
        let plain = [
            "# Guide\n\nRun `pytest -k {name}` and see `{}`.\n",
            "```js\nexport const x = {a: 1};\nimport y from 'y';\n```\n",
            "~~~~\n{ \"json\": true }\n~~~~\n",
            "Use ``a `{}` b`` here.\n",
            "Plain text with <em>html</em>.\n",
        ];
        for text in plain {
            assert_eq!(runs_as_code("md", None, text), None, "{text:?}");
        }
        // What the base had is not held again: an edit beside existing
        // MDX that adds none passes; one that adds some is held.
        let base = "import X from './x';\n\n# Page\n\n<X />\n";
        let edited = "import X from './x';\n\n# Page, renamed\n\n<X />\n";
        assert_eq!(runs_as_code("md", Some(base), edited), None);
        let more = "import X from './x';\nimport Y from 'child_process';\n\n# Page\n\n<X />\n";
        assert_eq!(runs_as_code("md", Some(base), more), Some(2));
    }

    #[test]
    fn rst_directives_that_run_or_read_are_held_and_layout_is_not() {
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
            assert!(runs_as_code("rst", None, text).is_some(), "{text:?}");
        }
        for text in [
            "Title\n=====\n\n.. note::\n\n   Careful.\n\n.. code-block:: python\n\n   import os\n",
            ".. _label:\n\n.. a comment\n\n.. autofunction:: pytest.raises\n",
            ".. |logo| image:: logo.png\n",
            ".. versionadded:: 8.0\n",
        ] {
            assert_eq!(runs_as_code("rst", None, text), None, "{text:?}");
        }
    }

    #[test]
    fn asciidoc_block_macros_other_than_media_are_held() {
        assert!(runs_as_code("adoc", None, "include::../.git/config[]\n").is_some());
        assert_eq!(
            runs_as_code("adoc", None, "= Title\n\nimage::logo.png[]\n"),
            None
        );
    }
}
