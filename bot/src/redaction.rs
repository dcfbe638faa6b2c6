//! The one secret filter for everything that leaves the host or is
//! printed: the log, the operator API's answers, `forgehand run`'s report
//! (its JSON and its lines), with the forge's outbound filter
//! (`forgehand_forge::api::outbound`) using the same scanner kind. It
//! knows the host's own credentials from the configuration and those
//! learned while serving (an App's installation tokens), each with its
//! encoded forms (base64, hex, percent-encoding); it replaces each by a
//! marker naming the credential, never the value.

use std::borrow::Cow;
use std::io::Write;
use std::sync::{LazyLock, RwLock};

use forgehand_gate::SecretScanner;
use secrecy::SecretString;
use serde_json::Value;

static KNOWN: LazyLock<RwLock<SecretScanner>> =
    LazyLock::new(|| RwLock::new(SecretScanner::new(Vec::new())));

/// From now on, `secrets` are redacted wherever this filter is used.
pub fn know(secrets: impl IntoIterator<Item = (String, SecretString)>) {
    let mut known = KNOWN.write().unwrap_or_else(|e| e.into_inner());
    for (name, secret) in secrets {
        known.add_host_secret(&name, secret);
    }
}

/// `text` with every known secret replaced.
pub fn text(text: &str) -> Cow<'_, str> {
    let known = KNOWN.read().unwrap_or_else(|e| e.into_inner());
    if known.scan_line(text).is_none() && !text.contains('\n') {
        return Cow::Borrowed(text);
    }
    let redacted = known.redact(text);
    if redacted.findings.is_empty() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(redacted.text)
    }
}

/// Every string in `value`, keys too, redacted in place.
pub fn json(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(redacted) = text(s) {
                *s = redacted;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(json),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut item) in entries {
                json(&mut item);
                map.insert(text(&key).into_owned(), item);
            }
        }
        _ => {}
    }
}

/// `value` as JSON with every known secret redacted.
pub fn to_json(value: &impl serde::Serialize) -> Value {
    let mut value = serde_json::to_value(value).unwrap_or(Value::Null);
    json(&mut value);
    value
}

/// A log writer: each event is formatted whole into it, then redacted
/// and written to stderr when it is dropped.
pub struct LogWriter {
    buffer: Vec<u8>,
}

impl LogWriter {
    pub fn new() -> LogWriter {
        LogWriter { buffer: Vec::new() }
    }
}

impl Default for LogWriter {
    fn default() -> Self {
        LogWriter::new()
    }
}

impl Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let line = String::from_utf8_lossy(&self.buffer);
        let _ = std::io::stderr().write_all(text(&line).as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 24, finding 6: the model key the agent put in its title
    /// reached `run --json`; encoded, it reached a commit.
    #[test]
    fn known_secrets_and_their_encodings_are_redacted_everywhere_this_filter_is_used() {
        know([(
            "model.api_key".to_owned(),
            SecretString::from("sk-redaction-test-0123456789".to_owned()),
        )]);
        let hex: String = "sk-redaction-test-0123456789"
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut report = serde_json::json!({
            "title": "Use sk-redaction-test-0123456789",
            "summary": format!("hex {hex}"),
            "nested": ["c2stcmVkYWN0aW9uLXRlc3QtMDEyMzQ1Njc4OQ=="],
        });
        json(&mut report);
        let shown = report.to_string();
        assert!(!shown.contains("sk-redaction-test"), "{shown}");
        assert!(!shown.contains(&hex), "{shown}");
        assert!(!shown.contains("c2stcmVkYWN0aW9uLXRlc3Qt"), "{shown}");
        assert_eq!(
            report["title"],
            "Use [redacted: the host's own credential model.api_key]"
        );
        assert_eq!(text("nothing here"), "nothing here");
    }
}
