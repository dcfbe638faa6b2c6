//! The secret scan that stands between the agent's work and a push: the
//! host's own credentials wherever their exact value appears, private-key
//! blocks, well-known token formats, and high-entropy values assigned to
//! names that say "secret". It reads what the push would add: each line
//! the diff adds (taken from libgit2 line by line, with its origin and its
//! number in the new file: no text of the file is ever parsed as diff
//! syntax), the path of every changed file, and the commit message. It
//! reports where and what kind, never the value.

use std::cell::RefCell;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::LazyLock;

use git2::{Delta, Diff, DiffLineType};

use regex::Regex;
use secrecy::{ExposeSecret, SecretString};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretKind {
    /// One of the host's own credentials, by the name it has there
    /// (`github.token`, …).
    HostCredential(String),
    PrivateKey,
    GitHubToken,
    GitLabToken,
    AwsAccessKeyId,
    AwsSecretAccessKey,
    SlackToken,
    SlackWebhook,
    OpenAiKey,
    AnthropicKey,
    /// A long, random-looking value assigned to a name like `password`.
    HighEntropyAssignment,
    /// What could not be scanned (an archive past the budget, encrypted
    /// or damaged), and why: not pushed, as a secret would not be.
    Unscannable(String),
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretKind::HostCredential(name) => write!(f, "the host's own credential {name}"),
            SecretKind::PrivateKey => f.write_str("a private key"),
            SecretKind::GitHubToken => f.write_str("a GitHub token"),
            SecretKind::GitLabToken => f.write_str("a GitLab token"),
            SecretKind::AwsAccessKeyId => f.write_str("an AWS access key id"),
            SecretKind::AwsSecretAccessKey => f.write_str("an AWS secret access key"),
            SecretKind::SlackToken => f.write_str("a Slack token"),
            SecretKind::SlackWebhook => f.write_str("a Slack webhook URL"),
            SecretKind::OpenAiKey => f.write_str("an OpenAI API key"),
            SecretKind::AnthropicKey => f.write_str("an Anthropic API key"),
            SecretKind::HighEntropyAssignment => {
                f.write_str("a random-looking value assigned to a secret-sounding name")
            }
            SecretKind::Unscannable(why) => write!(f, "{why}"),
        }
    }
}

/// Where a secret was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A line the diff adds, by its number in the new version of the file.
    Line { file: String, line: u32 },
    /// The path of a changed file.
    FileName { file: String },
    /// A line of the commit message (the pull request's title and body).
    CommitMessage { line: u32 },
    /// Inside an archive the change adds: a member's unpacked bytes
    /// (`member` empty: the archive itself could not be scanned).
    Archive { file: String, member: String },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Line { file, line } => write!(f, "{file}:{line}"),
            Place::FileName { file } => write!(f, "file name {file}"),
            Place::CommitMessage { line } => write!(f, "commit message line {line}"),
            Place::Archive { file, member } if member.is_empty() => write!(f, "{file}"),
            Place::Archive { file, member } => write!(f, "{file}, inside: {member}"),
        }
    }
}

/// Where a secret was found, and what kind. Its `Display` is safe to log
/// and to post: it never holds the value (a path that holds one is shown
/// with it masked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub place: Place,
    pub kind: SecretKind,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.kind)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("cannot read the diff: {0}")]
    Git(#[from] git2::Error),
    /// The diff is taken with `force_text`; should libgit2 still hand over
    /// a file as binary, it was not scanned, and nothing is pushed.
    #[error("{file} came out of the diff as binary, so it could not be scanned")]
    Binary { file: String },
}

/// Patterns, most specific first: an Anthropic key also looks like an
/// OpenAI one, and only the first kind found on a line is reported.
static PATTERNS: LazyLock<Vec<(SecretKind, Regex)>> = LazyLock::new(|| {
    let p = |kind, re: &str| (kind, Regex::new(re).expect("a valid pattern"));
    vec![
        p(
            SecretKind::PrivateKey,
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        ),
        p(
            SecretKind::GitHubToken,
            r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b",
        ),
        p(SecretKind::GitLabToken, r"\bglpat-[A-Za-z0-9_\-]{20}\b"),
        p(SecretKind::AwsAccessKeyId, r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
        p(
            SecretKind::AwsSecretAccessKey,
            r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}\b"#,
        ),
        p(
            SecretKind::SlackWebhook,
            r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+",
        ),
        p(SecretKind::SlackToken, r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        p(SecretKind::AnthropicKey, r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
        p(
            SecretKind::OpenAiKey,
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        ),
    ]
});

/// `name = "value"`, `NAME: value`, `"name": "value"` for names that say
/// secret; the value is judged by its entropy.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(?:secret|token|passw(?:or)?d|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|auth)[A-Za-z0-9_\-]*["']?\s*[:=]\s*["']?([A-Za-z0-9+/=_\-.]{20,})"#,
    )
    .expect("a valid pattern")
});

/// Bits per character above which a value looks random rather than like
/// a word or a placeholder (English text is near 3, random base64 near 6,
/// random hex near 4).
const ENTROPY_THRESHOLD: f64 = 3.7;

/// What is shown of a text whose secret could not be masked out of it.
const WITHHELD: &str = "(withheld: it holds what looks like a secret)";

/// Host secrets shorter than this are not searched for: they would match
/// ordinary text.
const MIN_HOST_SECRET_LEN: usize = 8;

pub struct SecretScanner {
    /// Each of the host's secrets by name, and under the same name each
    /// of its encoded forms ([`encoded::forms`]).
    host_secrets: Vec<(String, SecretString)>,
}

/// `value` and its encoded forms, each under `name`.
fn with_forms(name: &str, value: &SecretString) -> Vec<(String, SecretString)> {
    let mut out = vec![(name.to_owned(), value.clone())];
    out.extend(
        encoded::forms(value.expose_secret().as_bytes())
            .into_iter()
            .map(|form| (name.to_owned(), SecretString::from(form))),
    );
    out
}

impl fmt::Debug for SecretScanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.host_secrets.iter().map(|(n, _)| n.as_str()).collect();
        names.dedup();
        f.debug_struct("SecretScanner")
            .field("host_secrets", &names)
            .finish()
    }
}

impl SecretScanner {
    /// `host_secrets`: the host's own credentials, by name; each is found
    /// wherever its exact value, or one of its encoded forms (base64, hex,
    /// percent-encoding: [`encoded`]), appears.
    pub fn new(host_secrets: impl IntoIterator<Item = (String, SecretString)>) -> Self {
        SecretScanner {
            host_secrets: host_secrets
                .into_iter()
                .filter(|(_, s)| s.expose_secret().len() >= MIN_HOST_SECRET_LEN)
                .flat_map(|(name, value)| with_forms(&name, &value))
                .collect(),
        }
    }

    /// Scans what `diff` adds: the lines (by libgit2's per-line origin,
    /// never by their text) and the paths of the files it changes.
    pub fn scan_diff(&self, diff: &Diff<'_>) -> Result<Vec<Finding>, ScanError> {
        struct State {
            findings: Vec<Finding>,
            /// The current file, as findings show it.
            file: String,
            binary: Option<String>,
        }
        let state = RefCell::new(State {
            findings: Vec::new(),
            file: String::new(),
            binary: None,
        });
        let mut on_file = |delta: git2::DiffDelta<'_>, _: f32| {
            let mut state = state.borrow_mut();
            let new = delta.new_file().path_bytes().unwrap_or_default();
            let old = delta.old_file().path_bytes().unwrap_or_default();
            let mut paths = Vec::new();
            if delta.status() != Delta::Deleted {
                paths.push(new);
            }
            if old != new {
                paths.push(old);
            }
            let mut masked_new = None;
            for path in paths {
                let Some(kind) = self.scan_line(&String::from_utf8_lossy(path)) else {
                    continue;
                };
                // Shown escaped, as every path is, and masked in that form.
                let file = self
                    .masked(&forgehand_text::shown_path(Path::new(bytes_os(path))))
                    .unwrap_or_else(|| WITHHELD.to_owned());
                if path == new {
                    masked_new = Some(file.clone());
                }
                state.findings.push(Finding {
                    place: Place::FileName { file },
                    kind,
                });
            }
            state.file =
                masked_new.unwrap_or_else(|| forgehand_text::shown_path(Path::new(bytes_os(new))));
            true
        };
        let mut on_binary = |delta: git2::DiffDelta<'_>, _: git2::DiffBinary<'_>| {
            let path = delta.new_file().path_bytes().unwrap_or_default();
            state.borrow_mut().binary = Some(forgehand_text::shown_path(Path::new(bytes_os(path))));
            false
        };
        let mut on_line =
            |_: git2::DiffDelta<'_>, _: Option<git2::DiffHunk<'_>>, line: git2::DiffLine<'_>| {
                if line.origin_value() != DiffLineType::Addition {
                    return true;
                }
                let text = String::from_utf8_lossy(line.content());
                if let Some(kind) = self.scan_line(&text) {
                    let mut state = state.borrow_mut();
                    let file = state.file.clone();
                    state.findings.push(Finding {
                        place: Place::Line {
                            file,
                            line: line.new_lineno().unwrap_or(0),
                        },
                        kind,
                    });
                }
                true
            };
        let walked = diff.foreach(&mut on_file, Some(&mut on_binary), None, Some(&mut on_line));
        let state = state.into_inner();
        if let Some(file) = state.binary {
            return Err(ScanError::Binary { file });
        }
        walked?;
        Ok(state.findings)
    }

    /// Scans each line of a commit message.
    pub fn scan_message(&self, message: &str) -> Vec<Finding> {
        message
            .lines()
            .enumerate()
            .filter_map(|(n, text)| {
                self.scan_line(text).map(|kind| Finding {
                    place: Place::CommitMessage { line: n as u32 + 1 },
                    kind,
                })
            })
            .collect()
    }

    /// `text` with every secret found in it replaced, for showing a path
    /// that holds one; `None` when it holds none. Should anything still
    /// look like a secret after that, nothing of it is shown.
    pub fn masked(&self, text: &str) -> Option<String> {
        self.scan_line(text)?;
        let mut spans: Vec<Range<usize>> = Vec::new();
        for (_, secret) in &self.host_secrets {
            let secret = secret.expose_secret();
            spans.extend(text.match_indices(secret).map(|(at, s)| at..at + s.len()));
        }
        for (_, re) in PATTERNS.iter() {
            spans.extend(re.find_iter(text).map(|m| m.range()));
        }
        for captures in ASSIGNMENT.captures_iter(text) {
            if let Some(value) = captures.get(1).filter(|v| looks_random(v.as_str())) {
                spans.push(value.range());
            }
        }
        spans.sort_by_key(|r| r.start);
        let mut out = String::new();
        let mut at = 0;
        for span in spans {
            if span.end <= at {
                continue;
            }
            out.push_str(&text[at..span.start.max(at)]);
            out.push_str("[secret]");
            at = span.end;
        }
        out.push_str(&text[at..]);
        if self.scan_line(&out).is_some() {
            return Some(WITHHELD.to_owned());
        }
        Some(out)
    }

    /// The first kind of secret on one line, if any.
    pub fn scan_line(&self, line: &str) -> Option<SecretKind> {
        if let Some((name, _)) = self
            .host_secrets
            .iter()
            .find(|(_, secret)| line.contains(secret.expose_secret()))
        {
            return Some(SecretKind::HostCredential(name.clone()));
        }
        if let Some((kind, _)) = PATTERNS.iter().find(|(_, re)| re.is_match(line)) {
            return Some(kind.clone());
        }
        ASSIGNMENT
            .captures_iter(line)
            .filter_map(|c| c.get(1))
            .any(|value| looks_random(value.as_str()))
            .then_some(SecretKind::HighEntropyAssignment)
    }
}

fn bytes_os(bytes: &[u8]) -> &std::ffi::OsStr {
    std::os::unix::ffi::OsStrExt::from_bytes(bytes)
}

fn looks_random(value: &str) -> bool {
    // Placeholders and references are not secrets.
    let lower = value.to_ascii_lowercase();
    if [
        "example",
        "changeme",
        "change-me",
        "placeholder",
        "xxxx",
        "your_",
        "${",
        "env.",
    ]
    .iter()
    .any(|p| lower.contains(p))
    {
        return false;
    }
    shannon_entropy(value) >= ENTROPY_THRESHOLD
}

fn shannon_entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

pub mod archive;
pub mod encoded;
pub mod redact;
