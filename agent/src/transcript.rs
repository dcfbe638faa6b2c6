//! The transcript: every model request and response, every tool call and
//! result, one JSON object per line, appended as the run goes, with the
//! host's secrets replaced wherever their exact value appears.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};
use serde_json::{json, Value};

pub struct Transcript {
    path: PathBuf,
    out: BufWriter<File>,
    secrets: Vec<SecretString>,
}

const REDACTED: &str = "<redacted>";

impl Transcript {
    /// Creates `dir/<name>.jsonl` (and `dir`), readable by this user
    /// alone: a transcript holds the repository's code.
    pub fn create(dir: &Path, name: &str, secrets: Vec<SecretString>) -> std::io::Result<Self> {
        forgehand_sandbox::private::dir(dir)?;
        let path = dir.join(format!("{name}.jsonl"));
        let file = forgehand_sandbox::private::append_file(&path)?;
        Ok(Transcript {
            path: std::path::absolute(&path).unwrap_or(path),
            out: BufWriter::new(file),
            secrets: secrets
                .into_iter()
                .filter(|s| s.expose_secret().len() >= 4)
                .collect(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event; a transcript that cannot be written is logged,
    /// never a reason to stop the run.
    pub fn record(&mut self, event: &str, fields: Value) {
        let mut line = json!({
            "ts": now_rfc3339(),
            "event": event,
        });
        if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
            line.extend(fields);
        }
        let mut text = line.to_string();
        for secret in &self.secrets {
            let value = secret.expose_secret();
            if text.contains(value) {
                text = text.replace(value, REDACTED);
            }
            // The same value as it appears inside a JSON string.
            let escaped = serde_json::to_string(value).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if escaped != value && text.contains(escaped) {
                text = text.replace(escaped, REDACTED);
            }
        }
        let written = writeln!(self.out, "{text}").and_then(|_| self.out.flush());
        if let Err(error) = written {
            tracing::warn!(path = %self.path.display(), %error, "cannot append to the transcript");
        }
    }
}

/// Now, in RFC 3339 (what people and JSON clients read).
fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_transcript_is_readable_by_this_user_alone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data/transcripts");
        let mut transcript = Transcript::create(
            &dir,
            "job-1-1",
            vec![SecretString::from("the-forge-token-123".to_owned())],
        )
        .unwrap();
        transcript.record("tool", json!({"output": "cat: the-forge-token-123"}));
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("data")), 0o700);
        assert_eq!(mode(transcript.path()), 0o600);
        let text = std::fs::read_to_string(transcript.path()).unwrap();
        assert!(!text.contains("the-forge-token-123"), "{text}");
    }
}
