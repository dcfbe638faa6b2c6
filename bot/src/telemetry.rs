//! Logging: human-readable or JSON lines, filtered by `log.level`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

pub fn init(log: &LogConfig) {
    let filter = EnvFilter::try_new(&log.level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Colour codes are for a person at a terminal: a log file, the
        // journal or a container's log would keep them as escapes.
        .with_ansi(colours_for(&std::io::stderr()))
        .with_writer(crate::redaction::LogWriter::new);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = match log.format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Whether what is written to `stream` may carry colour codes: only on a
/// terminal, and not when `NO_COLOR` is set (no-color.org).
fn colours_for(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
