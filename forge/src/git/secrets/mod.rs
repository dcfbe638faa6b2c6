//! The secret scan that stands between the agent's work and a push: the
//! host's own credentials wherever their exact value appears, private-key
//! blocks, well-known token formats, and high-entropy values assigned to
//! names that say "secret". It reads only the lines a diff adds, and
//! reports where (file and line) and what kind, never the value.

use std::fmt;
use std::sync::LazyLock;

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
        }
    }
}

/// Where a secret was found. Its `Display` is safe to log and to post:
/// it never holds the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: String,
    /// The line in the new version of the file.
    pub line: u32,
    pub kind: SecretKind,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.kind)
    }
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

/// Host secrets shorter than this are not searched for: they would match
/// ordinary text.
const MIN_HOST_SECRET_LEN: usize = 8;

pub struct SecretScanner {
    host_secrets: Vec<(String, SecretString)>,
}

impl fmt::Debug for SecretScanner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.host_secrets.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("SecretScanner")
            .field("host_secrets", &names)
            .finish()
    }
}

impl SecretScanner {
    /// `host_secrets`: the host's own credentials, by name; each is found
    /// wherever its exact value appears.
    pub fn new(host_secrets: impl IntoIterator<Item = (String, SecretString)>) -> Self {
        SecretScanner {
            host_secrets: host_secrets
                .into_iter()
                .filter(|(_, s)| s.expose_secret().len() >= MIN_HOST_SECRET_LEN)
                .collect(),
        }
    }

    /// Scans the lines a unified diff (`git diff` output) adds.
    pub fn scan_diff(&self, diff: &str) -> Vec<Finding> {
        let mut findings = Vec::new();
        let mut file: Option<String> = None;
        let mut line: u32 = 0;
        for text in diff.lines() {
            if let Some(path) = text.strip_prefix("+++ ") {
                file = new_path(path);
                continue;
            }
            if text.starts_with("--- ") || text.starts_with("diff --git ") {
                continue;
            }
            if let Some(start) = hunk_start(text) {
                line = start;
                continue;
            }
            let Some(path) = &file else { continue };
            if let Some(added) = text.strip_prefix('+') {
                if let Some(kind) = self.scan_line(added) {
                    findings.push(Finding {
                        file: path.clone(),
                        line,
                        kind,
                    });
                }
                line += 1;
            } else if text.starts_with(' ') || text.is_empty() {
                line += 1;
            }
            // `-` lines are not in the new file; `\ No newline…` is not a line.
        }
        findings
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

/// The path of `+++ b/path` (None for `/dev/null`: a deleted file).
fn new_path(header: &str) -> Option<String> {
    let path = header.split('\t').next().unwrap_or(header).trim();
    if path == "/dev/null" {
        return None;
    }
    let path = path.trim_matches('"');
    Some(path.strip_prefix("b/").unwrap_or(path).to_owned())
}

/// The new file's first line number of a hunk header `@@ -a,b +c,d @@`.
fn hunk_start(text: &str) -> Option<u32> {
    let rest = text.strip_prefix("@@ ")?;
    let plus = rest.split_whitespace().find(|p| p.starts_with('+'))?;
    plus[1..].split(',').next()?.parse().ok()
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

pub mod redact;
#[cfg(test)]
mod tests;
