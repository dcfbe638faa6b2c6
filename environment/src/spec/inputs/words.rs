//! A shell text's words, as the shell would split them, that could name
//! files in the repository.

use super::found::{HOME, WORKSPACE};

/// The words of a shell text that could be paths in the repository, as
/// the shell splits them: quotes group (`"sp ace.sh"`), a backslash
/// escapes the next character (`sp\ ace.sh`), and `;&|<>()` and backquotes
/// separate. A quoted word is looked into too (`bash -c 'cd tools && sh
/// install.sh'`). A word `--opt=value` is looked at for its value. `~`,
/// `$HOME` and `${HOME}` at a word's start are the setup's home, `$PWD` and
/// `${PWD}` the directory it is in; an absolute path is also tried from
/// the repository (`$(pwd)/tools/x.sh` leaves `/tools/x.sh`). Other words
/// that expand (`$`, globs) are not guessed at.
pub(super) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut all = Vec::new();
    collect_words(text, 0, &mut all);
    all.into_iter()
}

/// How deep quoted words are looked into.
const MAX_QUOTING: usize = 3;

pub(super) fn collect_words(text: &str, depth: usize, out: &mut Vec<String>) {
    for (word, expands) in split_words(text) {
        if depth < MAX_QUOTING
            && word.contains(|c: char| c.is_whitespace() || ";&|<>()`".contains(c))
        {
            collect_words(&word, depth + 1, out);
        }
        let word = match word.rsplit_once('=') {
            Some((_, value)) => value.to_owned(),
            None => word,
        };
        let word = [
            ("$HOME", HOME),
            ("${HOME}", HOME),
            ("$PWD", "."),
            ("${PWD}", "."),
        ]
        .iter()
        .find_map(|(variable, value)| {
            let rest = word.strip_prefix(variable)?;
            (rest.is_empty() || rest.starts_with('/')).then(|| format!("{value}{rest}"))
        })
        .unwrap_or(word);
        // Any process's view under `/proc` (`/proc/$$/cwd`, `/proc/$PPID/
        // cwd`, `/proc/self/task/$$/cwd`) is taken as the current one's:
        // which process is known only at run time.
        let word = proc_as_self(&word).unwrap_or(word);
        let unguessable = expands && word.contains(['$', '*', '?', '[', '{']);
        if word.is_empty() || unguessable {
            continue;
        }
        // A short option's value may be attached: `make -Ctools`,
        // `python3 -mtools.install`, `pip install -rreq.txt`.
        if let Some(option) = word.strip_prefix('-') {
            let mut chars = option.chars();
            if chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && !chars.as_str().is_empty() {
                out.push(chars.as_str().to_owned());
            }
            continue;
        }
        // pip's `name @ file:///workspace/pkg`, npm's `file:../pkg`.
        let word = match word.strip_prefix("file:") {
            Some(rest) => match rest.strip_prefix("//") {
                Some(path) => path.to_owned(),
                None => rest.to_owned(),
            },
            None => word,
        };
        if word.is_empty() {
            continue;
        }
        if let Some(relative) = word.strip_prefix('/') {
            let elsewhere = !relative.starts_with(WORKSPACE) && !word.starts_with(HOME);
            if elsewhere && !relative.is_empty() {
                out.push(relative.to_owned());
            }
        }
        out.push(word);
    }
}

/// Splits `text` into words, each with whether an unquoted (or
/// double-quoted) part of it could expand.
pub(super) fn split_words(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut expands = false;
    let mut started = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    if next != '\n' {
                        word.push(next);
                    }
                }
                started = true;
            }
            '\'' => {
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
                started = true;
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = chars.next() {
                                word.push(next);
                            }
                        }
                        c => {
                            expands |= matches!(c, '$' | '`');
                            word.push(c);
                        }
                    }
                }
                started = true;
            }
            c if c.is_whitespace() || ";&|<>()`".contains(c) => {
                if started {
                    out.push((std::mem::take(&mut word), expands));
                }
                expands = false;
                started = false;
            }
            c => {
                expands |= matches!(c, '$' | '*' | '?' | '[' | '{');
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push((word, expands));
    }
    out
}

/// `word` with `/proc/<process>[/task/<thread>]/{cwd,root}` written as
/// `/proc/self/…`, when it has that shape.
pub(super) fn proc_as_self(word: &str) -> Option<String> {
    let at = word.find("/proc/")?;
    let rest = &word[at + "/proc/".len()..];
    let parts: Vec<&str> = rest.split('/').collect();
    let skip = match parts.as_slice() {
        [_, "cwd" | "root", ..] => 1,
        [_, "task", _, "cwd" | "root", ..] => 3,
        _ => return None,
    };
    Some(format!(
        "{}/proc/self/{}",
        &word[..at],
        parts[skip..].join("/")
    ))
}
