//! What an exec produced: its first and last bytes exactly, up to a cap
//! (a test runner prints its summary, and its failures, at the end), and
//! how it ended.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A piece of output as it arrived. Every byte is streamed, in order (the
/// channel is bounded: a slow consumer slows the command); what a
/// consumer keeps of it is its business. The captured result keeps the
/// head and the tail within the cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    pub stream: Stream,
    pub bytes: Vec<u8>,
}

/// One stream's output, exactly as written: all of it when it fits the
/// cap; otherwise its first half-cap bytes (`bytes`), its last half-cap
/// bytes (`tail`), and how many bytes between them were left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// All of the output, or its head when it was cut.
    pub bytes: Vec<u8>,
    /// The output's end, when it was cut.
    pub tail: Vec<u8>,
    /// Bytes left out between the head and the tail.
    pub dropped: u64,
}

impl Captured {
    pub fn is_truncated(&self) -> bool {
        self.dropped > 0
    }

    /// Adds Forgehand's own note at the end of what was kept.
    pub fn append_note(&mut self, note: &[u8]) {
        if self.is_truncated() {
            self.tail.extend_from_slice(note);
        } else {
            self.bytes.extend_from_slice(note);
        }
    }

    /// Text for people and models: lossy UTF-8, with a marker where the
    /// middle was left out, saying how much.
    pub fn to_text(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.is_truncated() {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[forgehand: {} bytes of output left out here; the head and the tail are kept]\n",
                self.dropped
            ));
            text.push_str(&String::from_utf8_lossy(&self.tail));
        }
        text
    }
}

/// Keeps a stream's head and tail within `cap` bytes as it arrives: the
/// first `cap` bytes as they come; past the cap, the first half of them
/// stays as the head and the rest becomes a ring of the latest bytes.
#[derive(Debug)]
pub(crate) struct Keeper {
    cap: usize,
    head: Vec<u8>,
    /// Past the cap: the latest bytes, oldest first from `start`.
    ring: Vec<u8>,
    start: usize,
    dropped: u64,
}

impl Keeper {
    pub(crate) fn new(cap: usize) -> Self {
        Keeper {
            cap,
            head: Vec::new(),
            ring: Vec::new(),
            start: 0,
            dropped: 0,
        }
    }

    fn tail_cap(&self) -> usize {
        self.cap - self.cap / 2
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        if self.ring.is_empty() && self.dropped == 0 {
            let room = self.cap.saturating_sub(self.head.len());
            let fits = bytes.len().min(room);
            self.head.extend_from_slice(&bytes[..fits]);
            bytes = &bytes[fits..];
            if bytes.is_empty() {
                return;
            }
            // Over the cap: the second half of what was kept starts the tail.
            let moved = self.head.split_off(self.cap / 2);
            self.ring = moved;
            self.start = 0;
        }
        let tail_cap = self.tail_cap();
        if tail_cap == 0 {
            self.dropped += bytes.len() as u64;
            return;
        }
        // Only the last `tail_cap` bytes of this piece can stay.
        if bytes.len() >= tail_cap {
            let skipped = bytes.len() - tail_cap;
            self.dropped += (self.ring.len() + skipped) as u64;
            self.ring = bytes[skipped..].to_vec();
            self.start = 0;
            return;
        }
        for &byte in bytes {
            if self.ring.len() < tail_cap {
                self.ring.push(byte);
            } else {
                self.ring[self.start] = byte;
                self.start = (self.start + 1) % tail_cap;
                self.dropped += 1;
            }
        }
    }

    pub(crate) fn finish(self) -> Captured {
        let mut tail = self.ring[self.start..].to_vec();
        tail.extend_from_slice(&self.ring[..self.start]);
        if self.dropped == 0 {
            // Cut at the cap with nothing left out: it is all one piece.
            let mut bytes = self.head;
            bytes.extend_from_slice(&tail);
            return Captured {
                bytes,
                tail: Vec::new(),
                dropped: 0,
            };
        }
        Captured {
            bytes: self.head,
            tail,
            dropped: self.dropped,
        }
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

/// Reads a stream to its end: keeps its head and tail within `cap` bytes,
/// counts what it leaves out (reading on, so the writer never blocks on a
/// full pipe), and sends every piece to `chunks` when streaming.
///
/// It stops early when `stop` turns true: a background process the
/// command started may hold the pipe open long after the command is done.
pub(crate) async fn pump<R: AsyncRead + Unpin>(
    mut reader: R,
    stream: Stream,
    cap: usize,
    mut chunks: Option<mpsc::Sender<OutputChunk>>,
    mut stop: watch::Receiver<bool>,
) -> Captured {
    let mut keeper = Keeper::new(cap);
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
        keeper.push(&buf[..n]);
        if let Some(tx) = &chunks {
            // A consumer that went away stops getting chunks; the output
            // is still captured.
            if tx
                .send(OutputChunk {
                    stream,
                    bytes: buf[..n].to_vec(),
                })
                .await
                .is_err()
            {
                chunks = None;
            }
        }
    }
    keeper.finish()
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
    async fn keeps_the_head_and_the_tail_exactly_and_counts_the_middle() {
        let data: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
        let got = pump(&data[..], Stream::Stdout, 100_000, None, never()).await;
        assert_eq!(got.bytes, data[..50_000]);
        assert_eq!(got.tail, data[250_000..]);
        assert_eq!(got.dropped, 200_000);
        let text = got.to_text();
        assert!(
            text.contains("\n[forgehand: 200000 bytes of output left out here"),
            "…"
        );

        let small = pump(&b"ok\n"[..], Stream::Stderr, 100, None, never()).await;
        assert_eq!(small.bytes, b"ok\n");
        assert!(!small.is_truncated());
        assert_eq!(small.to_text(), "ok\n");
    }

    /// Whatever the sizes the pieces come in, the result is the same: all
    /// of it within the cap, else its first and last half-caps.
    #[test]
    fn the_kept_bytes_do_not_depend_on_how_the_output_arrived() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        for cap in [0usize, 1, 2, 7, 100, 999, 1000, 1001, 5000] {
            for piece in [1usize, 3, 64, 333, 1000] {
                let mut keeper = Keeper::new(cap);
                for chunk in data.chunks(piece) {
                    keeper.push(chunk);
                }
                let got = keeper.finish();
                if data.len() <= cap {
                    assert_eq!((got.bytes.as_slice(), got.dropped), (&data[..], 0));
                } else {
                    let head = cap / 2;
                    let tail = cap - head;
                    assert_eq!(got.bytes, data[..head], "cap {cap} piece {piece}");
                    assert_eq!(
                        got.tail,
                        data[data.len() - tail..],
                        "cap {cap} piece {piece}"
                    );
                    assert_eq!(got.dropped as usize, data.len() - cap);
                }
            }
        }
    }

    /// A test run's summary is at its end: it survives the cut.
    #[tokio::test]
    async fn a_long_runs_last_lines_are_kept() {
        let mut out = String::new();
        for i in 0..50_000 {
            out.push_str(&format!("test case_{i} ... ok\n"));
        }
        out.push_str(
            "FAILED tests/test_calc.py::test_add - assert 3 == 4\n1 failed, 49999 passed\n",
        );
        let got = pump(out.as_bytes(), Stream::Stdout, 64 * 1024, None, never()).await;
        assert!(got.is_truncated());
        let text = got.to_text();
        assert!(text.starts_with("test case_0 ... ok\n"));
        assert!(
            text.ends_with("1 failed, 49999 passed\n"),
            "{}",
            &text[text.len() - 200..]
        );
    }

    #[tokio::test]
    async fn streams_every_piece_and_keeps_within_the_cap() {
        let (tx, mut rx) = mpsc::channel(16);
        let data = [7u8; 10];
        let got = pump(&data[..], Stream::Stderr, 4, Some(tx), never()).await;
        assert_eq!((got.bytes.len(), got.tail.len(), got.dropped), (2, 2, 6));
        let chunk = rx.recv().await.unwrap();
        assert_eq!(chunk.stream, Stream::Stderr);
        assert_eq!(chunk.bytes, vec![7u8; 10]);
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
