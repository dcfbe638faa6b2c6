//! Copying bytes both ways between the sandbox and the host it reached,
//! counted, until both sides are done, one fails, or neither has moved a
//! byte for the idle timeout.
//!
//! A tunnel (CONNECT) is copied as it comes. A forwarded plain-HTTP
//! request passes on exactly its declared body and nothing after it: a
//! client's pipelined next request may name another host, and must not
//! reach this one's origin, nor an upstream proxy that would serve it.
//!
//! Buffers are fixed (one per direction), so a peer that stops reading
//! stalls the copy instead of growing memory; the stall is idle time, and
//! the idle timeout ends it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Bytes moved so far, readable after the copy is dropped half-way (the
/// egress stopping) as well as when it ends.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub up: AtomicU64,
    pub down: AtomicU64,
}

/// What the sandbox's side may send on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Up {
    /// Everything, both ways, until both sides close.
    Tunnel,
    /// This many bytes (the rest of a request body); whatever follows is
    /// read and dropped, and the exchange ends when the host has answered
    /// and closed.
    Body(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// Both sides closed (or one failed).
    Closed,
    /// No byte either way for the idle timeout.
    Idle,
}

const BUFFER: usize = 16 * 1024;

pub(crate) async fn splice(
    client: &mut TcpStream,
    server: &mut TcpStream,
    up: Up,
    idle: Duration,
    counters: &Counters,
) -> End {
    let start = Instant::now();
    // Milliseconds since `start` at the last byte moved.
    let last = AtomicU64::new(0);
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let both = async {
        let down = pump(
            &mut server_read,
            &mut client_write,
            &counters.down,
            &last,
            start,
        );
        match up {
            Up::Tunnel => {
                let up = pump(
                    &mut client_read,
                    &mut server_write,
                    &counters.up,
                    &last,
                    start,
                );
                // The first failure ends both directions.
                let _ = tokio::try_join!(up, down);
            }
            Up::Body(length) => {
                let body = async {
                    let mut body = (&mut client_read).take(length);
                    pump_some(&mut body, &mut server_write, &counters.up, &last, start).await?;
                    drain(&mut client_read).await;
                    // Done sending: only the answer can end the exchange.
                    std::future::pending::<std::io::Result<()>>().await
                };
                tokio::select! {
                    _ = down => {}
                    _ = body => {}
                }
            }
        }
    };
    let watchdog = async {
        loop {
            let deadline = start + Duration::from_millis(last.load(Ordering::Relaxed)) + idle;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    };
    tokio::select! {
        () = both => End::Closed,
        () = watchdog => End::Idle,
    }
}

/// Copies until `reader` ends, without passing the end on.
async fn pump_some<R, W>(
    reader: &mut R,
    writer: &mut W,
    count: &AtomicU64,
    last: &AtomicU64,
    start: Instant,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buffer = vec![0u8; BUFFER];
    loop {
        let n = reader.read(&mut buffer).await?;
        if n == 0 {
            return Ok(());
        }
        last.store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
        writer.write_all(&buffer[..n]).await?;
        count.fetch_add(n as u64, Ordering::Relaxed);
        last.store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

/// Reads and drops until the end or an error: what a client sends after
/// a forwarded request's body goes nowhere (and is not activity).
async fn drain<R: AsyncRead + Unpin>(reader: &mut R) {
    let mut sink = vec![0u8; BUFFER];
    while let Ok(n) = reader.read(&mut sink).await {
        if n == 0 {
            return;
        }
    }
}

async fn pump<R, W>(
    reader: &mut R,
    writer: &mut W,
    count: &AtomicU64,
    last: &AtomicU64,
    start: Instant,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    pump_some(reader, writer, count, last, start).await?;
    // Pass the half-close on: the other side may still answer.
    writer.shutdown().await
}
