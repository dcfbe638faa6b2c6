//! Serving connections within limits. Every connection holds one of
//! `server.max_connections` slots while it lives; a connection beyond them
//! waits `server.connection_wait_ms` for one (at most as many wait as may
//! be served), else it is answered 503 and closed. A client gets
//! `server.header_read_timeout_ms` to send each request's headers (also
//! between two requests on a kept-alive connection), and a write to it
//! may stay blocked `server.write_timeout_ms`; the webhook handlers bound
//! the body (`server::body`). So a connection that stalls anywhere is
//! closed, and stalled connections cannot add up past the slots.

use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

use super::{router, AppState, Metrics};
use crate::config::ServerConfig;

/// The limits of the HTTP connections, from `[server]`.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    pub header_read_timeout: Duration,
    pub write_timeout: Duration,
    pub max_connections: usize,
    pub connection_wait: Duration,
    pub max_headers: usize,
    pub max_header_bytes: usize,
}

impl HttpLimits {
    pub fn new(config: &ServerConfig) -> Self {
        HttpLimits {
            header_read_timeout: config.header_read_timeout(),
            write_timeout: config.write_timeout(),
            max_connections: config.max_connections.max(1),
            connection_wait: config.connection_wait(),
            max_headers: config.max_headers,
            max_header_bytes: config.max_header_bytes,
        }
    }

    /// Each connection's read buffer: room for the largest head, and for
    /// body chunks of a reasonable size, and no more, whatever a client sends.
    fn read_buffer(&self) -> usize {
        (self.max_header_bytes + 8 * 1024).max(64 * 1024)
    }
}

/// What a connection over the limit is told before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// Serves `state`'s router on `listener` (HTTP/1.1) until `shutdown`
/// resolves; then stops accepting, lets every open connection finish its
/// request, and returns.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let limits = state.http.clone();
    let metrics = state.metrics.clone();
    let server = Arc::new(Server {
        app: router(state),
        slots: Arc::new(Semaphore::new(limits.max_connections)),
        waiting: Arc::new(Semaphore::new(limits.max_connections)),
        stop: CancellationToken::new(),
        limits,
        metrics,
    });
    let tracker = TaskTracker::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let slot = if let Ok(slot) = server.slots.clone().try_acquire_owned() {
            Slot::Free(slot)
        } else if let Ok(turn) = server.waiting.clone().try_acquire_owned() {
            Slot::Wait(turn)
        } else {
            server.refuse(&stream);
            continue;
        };
        tracker.spawn(server.clone().connection(stream, slot));
    }
    server.stop.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// Errors of one connection that was being accepted go on at once (as
/// axum's own server does); others (out of file descriptors) pause first.
async fn accept_failed(error: io::Error) {
    use io::ErrorKind::*;
    if matches!(
        error.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    warn!(%error, "accepting a connection failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

enum Slot {
    Free(OwnedSemaphorePermit),
    /// A turn to wait for a slot.
    Wait(OwnedSemaphorePermit),
}

struct Server {
    app: axum::Router,
    slots: Arc<Semaphore>,
    waiting: Arc<Semaphore>,
    stop: CancellationToken,
    limits: HttpLimits,
    metrics: Arc<Metrics>,
}

impl Server {
    /// Tells a connection over the limit so, without waiting for it. What
    /// it already sent is read and dropped first (a little of it): closed
    /// with unread bytes, the connection would be reset, and the client
    /// might lose the answer.
    fn refuse(&self, stream: &TcpStream) {
        let _ = stream.try_write(BUSY);
        let mut sink = [0u8; 4096];
        for _ in 0..4 {
            if !matches!(stream.try_read(&mut sink), Ok(n) if n > 0) {
                break;
            }
        }
        self.metrics.connection_refused();
        debug!("connection refused: server.max_connections are open");
    }

    async fn connection(self: Arc<Self>, stream: TcpStream, slot: Slot) {
        let _slot = match slot {
            Slot::Free(slot) => slot,
            Slot::Wait(turn) => {
                let wait = tokio::time::timeout(
                    self.limits.connection_wait,
                    self.slots.clone().acquire_owned(),
                );
                let got = tokio::select! {
                    got = wait => got,
                    _ = self.stop.cancelled() => return,
                };
                drop(turn);
                match got {
                    Ok(Ok(slot)) => slot,
                    _ => return self.refuse(&stream),
                }
            }
        };
        let io = TokioIo::new(WriteDeadline::new(stream, self.limits.write_timeout));
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout)
            .max_headers(self.limits.max_headers)
            .max_header_size(self.limits.max_header_bytes)
            .max_buf_size(self.limits.read_buffer());
        let mut conn =
            pin!(builder.serve_connection(io, TowerToHyperService::new(self.app.clone())));
        let served = tokio::select! {
            served = conn.as_mut() => served,
            _ = self.stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(error) = served {
            debug!(%error, "connection closed");
        }
    }
}

/// A stream whose writes fail once they have been blocked for `timeout`:
/// a client that sends requests but never reads the answers must not
/// hold its connection forever.
struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    blocked: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            blocked: None,
        }
    }

    /// `progress` as it is, or a time-out once blocked for too long.
    fn guard<T>(
        &mut self,
        cx: &mut Context<'_>,
        progress: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if progress.is_ready() {
            self.blocked = None;
            return progress;
        }
        let timeout = self.timeout;
        let blocked = self
            .blocked
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match blocked.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read the answer in time (server.write_timeout_ms)",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let progress = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.guard(cx, progress)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let progress = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.guard(cx, progress)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let progress = Pin::new(&mut self.inner).poll_flush(cx);
        self.guard(cx, progress)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let progress = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.guard(cx, progress)
    }
}
