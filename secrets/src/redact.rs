//! The outbound filter for text: what the bot posts on the forge (comments,
//! pull request titles and bodies, replies, status descriptions) is
//! written from what the agent said, and the agent may have read or made
//! up anything. Each secret the scanner knows is replaced by a marker that
//! says what was there, never the value; the findings say where (line and
//! kind), so they can be logged.

use std::fmt;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use secrecy::{ExposeSecret, SecretString};

use super::{looks_random, SecretKind, SecretScanner, ASSIGNMENT, PATTERNS};

/// Learned secrets shorter than this are not searched for: they would
/// match ordinary text (the scanner's own rule for its host secrets).
const MIN_LEARNED_LEN: usize = 8;

/// A private key from its BEGIN line to its END line, whole; one with no
/// END line runs to the end of the text (a key cut short is still a key).
static PRIVATE_KEY_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)",
    )
    .expect("a valid pattern")
});

/// Text with its secrets replaced by markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub text: String,
    /// Where each replaced value was, in the text as given.
    pub findings: Vec<Redaction>,
}

/// One replaced value: its line (from 1) and kind. Safe to log: it never
/// holds the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction {
    pub line: u32,
    pub kind: SecretKind,
}

impl fmt::Display for Redaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.kind)
    }
}

/// What replaces a value of `kind`.
pub fn marker(kind: &SecretKind) -> String {
    format!("[redacted: {kind}]")
}

impl SecretScanner {
    /// `text` with every secret the scanner knows replaced by a
    /// [`marker`]: the host's own credentials wherever their exact value
    /// appears, private-key blocks whole (BEGIN to END), the known token
    /// formats, and random-looking values assigned to secret-sounding
    /// names (the value only).
    pub fn redact(&self, text: &str) -> Redacted {
        let mut spans = self.secret_spans(text);
        if spans.is_empty() {
            return Redacted {
                text: text.to_owned(),
                findings: Vec::new(),
            };
        }
        // Overlapping finds are one: the earliest start wins, and the
        // kind found first (the most specific) names it.
        spans.sort_by_key(|(range, rank, _)| (range.start, *rank));
        let mut merged: Vec<(Range<usize>, SecretKind)> = Vec::new();
        for (range, _, kind) in spans {
            match merged.last_mut() {
                Some((last, _)) if range.start < last.end => last.end = last.end.max(range.end),
                _ => merged.push((range, kind)),
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut findings = Vec::with_capacity(merged.len());
        let mut at = 0;
        for (range, kind) in merged {
            out.push_str(&text[at..range.start]);
            out.push_str(&marker(&kind));
            findings.push(Redaction {
                line: line_of(text, range.start),
                kind,
            });
            at = range.end;
        }
        out.push_str(&text[at..]);
        Redacted {
            text: out,
            findings,
        }
    }

    /// Also treats `secret` (known by `name`) as one of the host's own,
    /// as a credential learned after start-up (an installation token).
    pub fn add_host_secret(&mut self, name: &str, secret: SecretString) {
        let value = secret.expose_secret();
        if value.len() < MIN_LEARNED_LEN
            || self
                .host_secrets
                .iter()
                .any(|(_, s)| s.expose_secret() == value)
        {
            return;
        }
        self.host_secrets.extend(super::with_forms(name, &secret));
    }

    /// Every secret's byte range in `text`, with a rank (lower first
    /// when finds start at the same place) and kind.
    fn secret_spans(&self, text: &str) -> Vec<(Range<usize>, u8, SecretKind)> {
        let mut spans = Vec::new();
        for (name, secret) in &self.host_secrets {
            let value = secret.expose_secret();
            for (start, found) in text.match_indices(value) {
                spans.push((
                    start..start + found.len(),
                    0,
                    SecretKind::HostCredential(name.clone()),
                ));
            }
        }
        for m in PRIVATE_KEY_BLOCK.find_iter(text) {
            spans.push((m.range(), 1, SecretKind::PrivateKey));
        }
        for (kind, re) in PATTERNS.iter() {
            if *kind == SecretKind::PrivateKey {
                continue; // whole blocks, above
            }
            for m in re.find_iter(text) {
                spans.push((m.range(), 2, kind.clone()));
            }
        }
        for captures in ASSIGNMENT.captures_iter(text) {
            if let Some(value) = captures.get(1).filter(|v| looks_random(v.as_str())) {
                spans.push((value.range(), 3, SecretKind::HighEntropyAssignment));
            }
        }
        spans
    }
}

fn line_of(text: &str, offset: usize) -> u32 {
    let newlines = text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    u32::try_from(newlines + 1).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Format-valid, made-up values built here, so that no token-shaped
    /// literal sits in the repository.
    fn token(prefix: &str, n: usize) -> String {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut x: u64 = 7;
        let body: String = (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                alphabet[(x >> 33) as usize % alphabet.len()] as char
            })
            .collect();
        format!("{prefix}{body}")
    }

    fn scanner() -> SecretScanner {
        SecretScanner::new([(
            "gitea.token".to_owned(),
            SecretString::from("host-token-value-1234567".to_owned()),
        )])
    }

    #[test]
    fn each_kind_is_replaced_by_its_marker_and_found_by_line() {
        let github = token("ghp_", 36);
        let text = format!(
            "Done.\nThe token host-token-value-1234567 was in .env\nand {github} too.\npassword = \"Zq8rT2vLx9WmB4nKc7PdY3sF\"\n"
        );
        let redacted = scanner().redact(&text);
        assert_eq!(
            redacted.text,
            "Done.\nThe token [redacted: the host's own credential gitea.token] was in .env\nand [redacted: a GitHub token] too.\npassword = \"[redacted: a random-looking value assigned to a secret-sounding name]\"\n"
        );
        let places: Vec<String> = redacted.findings.iter().map(|f| f.to_string()).collect();
        assert_eq!(
            places,
            [
                "line 2: the host's own credential gitea.token",
                "line 3: a GitHub token",
                "line 4: a random-looking value assigned to a secret-sounding name",
            ]
        );
        for finding in &redacted.findings {
            let shown = format!("{finding} {finding:?}");
            assert!(
                !shown.contains("host-token-value") && !shown.contains(&github),
                "{shown}"
            );
        }
    }

    #[test]
    fn a_private_key_is_removed_whole_from_begin_to_end() {
        let (begin, end) = (
            format!("-----BEGIN RSA {}-----", "PRIVATE KEY"),
            format!("-----END RSA {}-----", "PRIVATE KEY"),
        );
        let text = format!(
            "Here it is:\n{begin}\nMIIEowIBAAKCAQEA1x2y3z\nc2VjcmV0IGtleSBib2R5\n{end}\nThanks.\n"
        );
        let redacted = scanner().redact(&text);
        assert_eq!(
            redacted.text,
            "Here it is:\n[redacted: a private key]\nThanks.\n"
        );
        assert_eq!(
            redacted.findings,
            [Redaction {
                line: 2,
                kind: SecretKind::PrivateKey
            }]
        );
        // Cut short, it runs to the end.
        let cut = format!("a\n{begin}\nMIIEowIBAAKCAQEA1x2y3z\n");
        assert_eq!(scanner().redact(&cut).text, "a\n[redacted: a private key]");
    }

    #[test]
    fn overlapping_finds_are_one_marker_and_text_without_secrets_is_unchanged() {
        // The host's token is itself a GitHub token: one marker, named
        // for the host.
        let github = token("ghp_", 36);
        let scanner = SecretScanner::new([(
            "github.token".to_owned(),
            SecretString::from(github.clone()),
        )]);
        let redacted = scanner.redact(&format!("token: {github}"));
        assert_eq!(
            redacted.text,
            "token: [redacted: the host's own credential github.token]"
        );
        assert_eq!(redacted.findings.len(), 1);
        let plain = "Fixed `add`; `sh test.sh` passes. Closes #1";
        let same = scanner.redact(plain);
        assert_eq!(same.text, plain);
        assert!(same.findings.is_empty());
    }

    #[test]
    fn a_secret_learned_later_is_redacted_too() {
        let mut scanner = scanner();
        scanner.add_host_secret(
            "installation token",
            SecretString::from("ghs-like-installation-value-99".to_owned()),
        );
        scanner.add_host_secret("too short", SecretString::from("abc".to_owned()));
        let redacted = scanner.redact("x ghs-like-installation-value-99 abc");
        assert_eq!(
            redacted.text,
            "x [redacted: the host's own credential installation token] abc"
        );
    }
}
