//! What an exec produced: exact bytes up to a cap, and how it ended.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A piece of output as it arrived, before the cap: the cap applies to
/// streamed output too, so a consumer never holds more than it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    pub stream: Stream,
    pub bytes: Vec<u8>,
}

/// The first bytes of one stream, exactly as written, and how many more
/// were written and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub bytes: Vec<u8>,
    pub dropped: u64,
}

impl Captured {
    pub fn is_truncated(&self) -> bool {
        self.dropped > 0
    }

    /// Text for people and models: lossy UTF-8, and a marker where output
    /// was cut, saying how much.
    pub fn to_text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.is_truncated() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[forgehand: output truncated; {} more bytes were dropped]\n",
                self.dropped
            ));
        }
        text
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Exited(i32),
    /// Killed by a signal: the memory limit's OOM kill shows as SIGKILL.
    Signaled(i32),
    /// Killed, with everything it started, at the time limit.
    TimedOut,
}

impl ExitStatus {
    pub fn success(self) -> bool {
        self == ExitStatus::Exited(0)
    }

    /// As a shell reports it: 128 + signal; 124 for a timeout, as
    /// timeout(1) does.
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Exited(code) => code,
            ExitStatus::Signaled(signal) => 128 + signal,
            ExitStatus::TimedOut => 124,
        }
    }
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Exited(code) => write!(f, "exit status {code}"),
            ExitStatus::Signaled(9) => write!(f, "killed (SIGKILL; the memory limit does this)"),
            ExitStatus::Signaled(signal) => write!(f, "killed by signal {signal}"),
            ExitStatus::TimedOut => write!(f, "killed at the time limit"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ExecOutput {
    pub status: ExitStatus,
    pub stdout: Captured,
    pub stderr: Captured,
    pub duration: Duration,
}

/// Reads a stream to its end: keeps the first `cap` bytes, counts the rest
/// (reading on, so the writer never blocks on a full pipe), and sends what
/// it keeps to `chunks` when streaming.
///
/// It stops early when `stop` turns true: a background process the
/// command started may hold the pipe open long after the command is done.
pub(crate) async fn pump<R: AsyncRead + Unpin>(
    mut reader: R,
    stream: Stream,
    cap: usize,
    chunks: Option<mpsc::Sender<OutputChunk>>,
    mut stop: watch::Receiver<bool>,
) -> Captured {
    let mut captured = Captured::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let read = tokio::select! {
            biased;
            read = reader.read(&mut buf) => read,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let room = cap.saturating_sub(captured.bytes.len());
        let kept = n.min(room);
        if kept > 0 {
            captured.bytes.extend_from_slice(&buf[..kept]);
            if let Some(tx) = &chunks {
                // A consumer that went away stops getting chunks; the
                // output is still captured.
                let _ = tx
                    .send(OutputChunk {
                        stream,
                        bytes: buf[..kept].to_vec(),
                    })
                    .await;
            }
        }
        captured.dropped += (n - kept) as u64;
    }
    captured
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> watch::Receiver<bool> {
        let (tx, rx) = watch::channel(false);
        std::mem::forget(tx);
        rx
    }

    #[tokio::test]
    async fn keeps_exact_bytes_up_to_the_cap_and_counts_the_rest() {
        let data: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
        let got = pump(&data[..], Stream::Stdout, 100_000, None, never()).await;
        assert_eq!(got.bytes, data[..100_000]);
        assert_eq!(got.dropped, 200_000);
        assert!(got.to_text().ends_with("200000 more bytes were dropped]\n"));

        let small = pump(&b"ok\n"[..], Stream::Stderr, 100, None, never()).await;
        assert_eq!(small.bytes, b"ok\n");
        assert!(!small.is_truncated());
        assert_eq!(small.to_text(), "ok\n");
    }

    #[tokio::test]
    async fn streams_only_what_it_keeps() {
        let (tx, mut rx) = mpsc::channel(16);
        let data = [7u8; 10];
        let got = pump(&data[..], Stream::Stderr, 4, Some(tx), never()).await;
        assert_eq!(got.bytes, vec![7u8; 4]);
        let chunk = rx.recv().await.unwrap();
        assert_eq!(chunk.stream, Stream::Stderr);
        assert_eq!(chunk.bytes, vec![7u8; 4]);
        assert!(rx.recv().await.is_none());
    }

    #[test]
    fn exit_codes_read_like_a_shell() {
        assert_eq!(ExitStatus::Signaled(9).code(), 137);
        assert_eq!(ExitStatus::TimedOut.code(), 124);
        assert!(ExitStatus::Exited(0).success());
        assert!(!ExitStatus::Exited(1).success());
    }
}
