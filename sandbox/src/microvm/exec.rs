//! One command in a microVM: microsandbox's streaming exec, read to the
//! end with output capped, killed (its whole process group) at the time
//! limit or when the caller gives up on it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use microsandbox::protocol::exec::ExecFailureKind;
use microsandbox::{ExecControl, ExecEvent, Sandbox as Vm};
use tokio::sync::mpsc;

use super::config::{command_line, exec_options};
use crate::output::Keeper;
use crate::{
    Captured, ExecOutput, ExecRequest, ExitStatus, Limits, OutputChunk, SandboxError, Stream,
};

/// How long a killed command gets to report its end before it counts as
/// gone anyway.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// One stream's output: its head and tail within the cap, and a count of
/// the rest (the semantics of `output::pump`, which reads an
/// `AsyncRead`; here the bytes arrive as exec events).
pub(super) struct Capture {
    stream: Stream,
    keeper: Keeper,
}

impl Capture {
    pub(super) fn new(stream: Stream, cap: usize) -> Self {
        Capture {
            stream,
            keeper: Keeper::new(cap),
        }
    }

    /// Keeps what the cap allows and returns the piece as a chunk to stream.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Option<OutputChunk> {
        if bytes.is_empty() {
            return None;
        }
        self.keeper.push(bytes);
        Some(OutputChunk {
            stream: self.stream,
            bytes: bytes.to_vec(),
        })
    }

    pub(super) fn finish(self) -> Captured {
        self.keeper.finish()
    }
}

/// Kills the command's process group if the exec is abandoned midway (its
/// future dropped: the job was cancelled).
struct KillOnDrop(Option<ExecControl>);

impl KillOnDrop {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let (Some(control), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(async move {
                let _ = control.kill().await;
            });
        }
    }
}

/// Runs `request` (already validated) in `vm` to its end or its time limit.
pub(super) async fn run(
    vm: &Vm,
    base_env: &BTreeMap<String, String>,
    limits: &Limits,
    workdir: &str,
    request: ExecRequest,
    chunks: Option<mpsc::Sender<OutputChunk>>,
) -> Result<ExecOutput, SandboxError> {
    let (program, args) = command_line(base_env, &request)?;
    let timeout = request
        .timeout
        .unwrap_or(limits.timeout)
        .min(limits.timeout);
    let started = Instant::now();
    let mut handle = vm
        .exec_stream_with(program, |options| {
            exec_options(options, args, workdir, limits, request.stdin)
        })
        .await
        .map_err(|e| SandboxError::Internal(format!("starting the command in the microVM: {e}")))?;
    let mut guard = KillOnDrop(Some(handle.control()));
    let cap = limits.output_limit_bytes;
    let (mut stdout, mut stderr) = (
        Capture::new(Stream::Stdout, cap),
        Capture::new(Stream::Stderr, cap),
    );
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    // Set once the time limit struck and the group was killed.
    let mut killed_at: Option<tokio::time::Instant> = None;

    let status = loop {
        let event = match killed_at {
            None => tokio::select! {
                event = handle.recv() => event,
                _ = &mut deadline => {
                    // agentd makes each command a session leader and
                    // signals the whole group: background children die too.
                    let _ = handle.kill().await;
                    killed_at = Some(tokio::time::Instant::now());
                    continue;
                }
            },
            Some(at) => match tokio::time::timeout_at(at + KILL_GRACE, handle.recv()).await {
                Ok(event) => event,
                Err(_) => break ExitStatus::TimedOut,
            },
        };
        let timed_out = killed_at.is_some();
        match event {
            Some(ExecEvent::Stdout(bytes)) => send(stdout.push(&bytes), &chunks).await,
            Some(ExecEvent::Stderr(bytes)) => send(stderr.push(&bytes), &chunks).await,
            Some(ExecEvent::Exited { .. }) if timed_out => break ExitStatus::TimedOut,
            Some(ExecEvent::Exited { code }) => break exit_status(code),
            Some(ExecEvent::Failed(failure)) => {
                // The program never ran; say why where a shell would.
                let message = format!("{}\n", failure.message);
                send(stderr.push(message.as_bytes()), &chunks).await;
                break if timed_out {
                    ExitStatus::TimedOut
                } else {
                    ExitStatus::Exited(failure_code(failure.kind))
                };
            }
            Some(ExecEvent::Started { .. } | ExecEvent::StdinError(_)) => {}
            None if timed_out => break ExitStatus::TimedOut,
            None => return Err(SandboxError::Internal(
                "the microVM ended the command's session without an exit status (did the VM stop?)"
                    .into(),
            )),
        }
    };
    guard.disarm();
    Ok(ExecOutput {
        status,
        stdout: stdout.finish(),
        stderr: stderr.finish(),
        duration: started.elapsed(),
    })
}

async fn send(chunk: Option<OutputChunk>, chunks: &Option<mpsc::Sender<OutputChunk>>) {
    if let (Some(chunk), Some(tx)) = (chunk, chunks) {
        // A consumer that went away stops getting chunks; the output is
        // still captured.
        let _ = tx.send(chunk).await;
    }
}

/// agentd 0.7.13 reports the exit code of a process that exited, and -1
/// for one killed by a signal, without saying which. The common causes are
/// SIGKILL (the guest's OOM killer, a kill -9), so that is what it is
/// reported as: 137, as a shell would show an OOM kill.
pub(super) fn exit_status(code: i32) -> ExitStatus {
    if code >= 0 {
        ExitStatus::Exited(code)
    } else {
        ExitStatus::Signaled(libc::SIGKILL)
    }
}

/// Exit codes as a shell gives them for a program it could not run.
pub(super) fn failure_code(kind: ExecFailureKind) -> i32 {
    match kind {
        ExecFailureKind::PermissionDenied | ExecFailureKind::NotExecutable => 126,
        _ => 127,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_head_and_the_tail_and_streams_every_piece() {
        let data: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
        let mut capture = Capture::new(Stream::Stdout, 100_000);
        let mut streamed = Vec::new();
        for piece in data.chunks(7_777) {
            if let Some(chunk) = capture.push(piece) {
                assert_eq!(chunk.stream, Stream::Stdout);
                streamed.extend(chunk.bytes);
            }
        }
        let got = capture.finish();
        assert_eq!(got.bytes, data[..50_000]);
        assert_eq!(got.tail, data[250_000..]);
        assert_eq!(streamed, data, "every piece is streamed");
        assert_eq!(got.dropped, 200_000);

        let mut small = Capture::new(Stream::Stderr, 100);
        small.push(b"ok\n");
        let small = small.finish();
        assert_eq!(small.bytes, b"ok\n");
        assert!(!small.is_truncated());
    }

    #[test]
    fn exit_codes_read_like_a_shell() {
        assert_eq!(exit_status(0), ExitStatus::Exited(0));
        assert_eq!(exit_status(3), ExitStatus::Exited(3));
        assert_eq!(exit_status(-1).code(), 137);
        assert_eq!(failure_code(ExecFailureKind::NotFound), 127);
        assert_eq!(failure_code(ExecFailureKind::PermissionDenied), 126);
    }
}
