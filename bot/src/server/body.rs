//! Reading a webhook body within its limits: `server.max_body_bytes` for
//! one body, `server.body_read_timeout_ms` for it to arrive, and
//! `server.body_buffer_bytes` for all bodies held at once. Only requests
//! that carry a well-formed signature header get this far; their bodies
//! are still unverified, so what they may hold is bounded the same way.

use std::sync::Arc;

use axum::body::Body;
use axum::body::HttpBody as _;
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The bytes of bodies that may be held at once, shared by all requests.
#[derive(Clone)]
pub struct BodyBudget(Arc<Semaphore>);

impl BodyBudget {
    pub fn new(bytes: usize) -> Self {
        BodyBudget(Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))))
    }

    /// Bytes not held by any body now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}

/// A share of the budget; given back when dropped.
struct Held {
    budget: BodyBudget,
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl Held {
    fn none(budget: &BodyBudget) -> Self {
        Held {
            budget: budget.clone(),
            permit: None,
            bytes: 0,
        }
    }

    /// Holds `total` bytes in all, taking more if needed; never waits.
    fn grow_to(&mut self, total: usize) -> Result<(), BodyError> {
        if total <= self.bytes {
            return Ok(());
        }
        let more = u32::try_from(total - self.bytes).map_err(|_| BodyError::Busy)?;
        let permit = self
            .budget
            .0
            .clone()
            .try_acquire_many_owned(more)
            .map_err(|_| BodyError::Busy)?;
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        self.bytes = total;
        Ok(())
    }
}

/// A body read whole, holding its share of the budget while it lives.
pub struct HeldBody {
    bytes: Vec<u8>,
    _held: Held,
}

impl std::ops::Deref for HeldBody {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// Longer than the limit: said by its length, or found while reading.
    TooLarge,
    /// The budget of buffered bytes is spent.
    Busy,
    /// Not all there before the deadline.
    TimedOut,
    Unreadable,
}

/// Chunks smaller than this are gathered into one buffer (see [`read`]).
const SMALL_CHUNK: usize = 16 << 10;
/// What keeping one chunk costs besides its bytes (its handle and the
/// allocator's bookkeeping), held against the budget too.
const CHUNK_OVERHEAD: usize = 64;

/// Whether the body is known, before a byte of it is read, to be longer
/// than `limit` (its `Content-Length`).
pub fn declared_too_large(body: &Body, limit: usize) -> bool {
    body.size_hint().lower() > limit as u64
}

/// Reads `body` whole by `deadline`. What is buffered is held against
/// `budget` as the buffer grows (all at once when the length is
/// declared), and the read stops as soon as it passes `limit`.
pub async fn read(
    mut body: Body,
    limit: usize,
    budget: &BodyBudget,
    deadline: Instant,
) -> Result<HeldBody, BodyError> {
    let hint = body.size_hint();
    if hint.lower() > limit as u64 {
        return Err(BodyError::TooLarge);
    }
    // What has arrived is held, byte for byte, as it arrives: a declared
    // length is only a promise (a caller without the secret could declare
    // 64 MiB, send nothing, and hold the budget signed deliveries need),
    // and the chunks are kept as they came, so a body that stalls halfway
    // holds what it sent, not a buffer grown ahead of it.
    // What has arrived is held as it arrives, never a declared length (a
    // caller without the secret could declare 64 MiB, send nothing, and
    // hold the budget signed deliveries need) nor a buffer grown far
    // ahead: large chunks are kept as they came, small ones gathered into
    // one buffer (held at its capacity), so that a body sent a byte a
    // chunk costs its sender about what it costs the host.
    let mut held = Held::none(budget);
    let mut chunks: Vec<axum::body::Bytes> = Vec::new();
    let mut kept = 0usize;
    let mut small: Vec<u8> = Vec::new();
    let mut received = 0usize;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(BodyError::TimedOut),
            Ok(None) => break,
            Ok(Some(Err(_))) => return Err(BodyError::Unreadable),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        received += data.len();
        if received > limit {
            return Err(BodyError::TooLarge);
        }
        if data.len() >= SMALL_CHUNK {
            // In order: what was gathered before it goes first.
            if !small.is_empty() {
                kept += small.len();
                chunks.push(axum::body::Bytes::from(std::mem::take(&mut small)));
            }
            kept += data.len();
            chunks.push(data);
        } else {
            if small.len() + data.len() > small.capacity() {
                let want = (small.capacity() * 2)
                    .max(small.len() + data.len())
                    .max(256);
                held.grow_to(kept + want + (chunks.len() + 1) * CHUNK_OVERHEAD)?;
                small.reserve_exact(want - small.len());
            }
            small.extend_from_slice(&data);
            if small.len() >= SMALL_CHUNK {
                kept += small.len();
                chunks.push(axum::body::Bytes::from(std::mem::take(&mut small)));
            }
        }
        held.grow_to(kept + small.capacity() + chunks.len() * CHUNK_OVERHEAD)?;
    }
    if !small.is_empty() {
        chunks.push(axum::body::Bytes::from(small));
    }
    // One buffer for the whole body, made once it is all there.
    let bytes = match chunks.len() {
        1 => Vec::from(chunks.pop().expect("one chunk")),
        _ => chunks.concat(),
    };
    Ok(HeldBody { bytes, _held: held })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::{stream, StreamExt};

    use super::*;

    fn chunked(chunks: Vec<&'static [u8]>) -> Body {
        Body::from_stream(stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(axum::body::Bytes::from_static(c))),
        ))
    }

    /// A deadline none of these reads comes near: only
    /// `a_body_that_stalls_times_out` is about the deadline, and a body
    /// that times out halfway would give its share back before the test
    /// looks.
    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    /// A body's end that never comes: says so on `polled` the first time
    /// the read asks for more, which it does only once it has taken in
    /// (and held) everything before it.
    fn then_waits(
        polled: tokio::sync::oneshot::Sender<()>,
    ) -> impl futures::Stream<Item = Result<axum::body::Bytes, std::io::Error>> {
        let mut polled = Some(polled);
        stream::poll_fn(move |_| {
            if let Some(polled) = polled.take() {
                let _ = polled.send(());
            }
            std::task::Poll::Pending
        })
    }

    /// Waits for `polled`; a read that never asks for more fails the test
    /// after a minute (a hang detector: it takes microseconds).
    async fn waiting_for_more(polled: tokio::sync::oneshot::Receiver<()>) {
        tokio::time::timeout(Duration::from_secs(60), polled)
            .await
            .expect("hung: the read never asked for more of the body")
            .expect("the body is alive");
    }

    #[tokio::test]
    async fn a_body_is_held_against_the_budget_while_it_lives() {
        // A small body is gathered into a buffer of at least 256 bytes.
        let budget = BodyBudget::new(500);
        let body = read(Body::from(vec![b'x'; 60]), 80, &budget, soon())
            .await
            .unwrap();
        assert_eq!(body.len(), 60);
        assert_eq!(budget.available(), 500 - 256 - CHUNK_OVERHEAD);
        // A second one does not fit beside it.
        let second = read(Body::from(vec![b'x'; 60]), 80, &budget, soon()).await;
        assert_eq!(second.err(), Some(BodyError::Busy));
        drop(body);
        assert_eq!(budget.available(), 500);
    }

    #[tokio::test]
    async fn a_streamed_body_stops_at_the_limit_and_gives_its_share_back() {
        let budget = BodyBudget::new(1000);
        let body = chunked(vec![&[b'x'; 40], &[b'x'; 40], &[b'x'; 40]]);
        let read = read(body, 100, &budget, soon()).await;
        assert_eq!(read.err(), Some(BodyError::TooLarge));
        assert_eq!(budget.available(), 1000);

        let body = chunked(vec![&[b'x'; 40], &[b'x'; 40]]);
        let whole = super::read(body, 100, &budget, soon()).await.unwrap();
        assert_eq!(whole.len(), 80);
        assert!(budget.available() <= 1000 - 80);
    }

    #[tokio::test]
    async fn a_declared_length_past_the_limit_is_refused_unread() {
        let budget = BodyBudget::new(1000);
        let body = Body::from(vec![b'x'; 101]);
        assert!(declared_too_large(&body, 100));
        let read = read(body, 100, &budget, soon()).await;
        assert_eq!(read.err(), Some(BodyError::TooLarge));
    }

    /// A body that declares `len` bytes and sends none; says on its
    /// channel when it is first asked for a frame.
    struct Promised(u64, Option<tokio::sync::oneshot::Sender<()>>);

    impl axum::body::HttpBody for Promised {
        type Data = axum::body::Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            if let Some(polled) = self.get_mut().1.take() {
                let _ = polled.send(());
            }
            std::task::Poll::Pending
        }

        fn size_hint(&self) -> http_body::SizeHint {
            http_body::SizeHint::with_exact(self.0)
        }
    }

    /// Red-team finding: eleven idle connections declaring 25 MiB, 25
    /// MiB, 8 MiB, … held the whole 64 MiB budget and every signed
    /// delivery got a 503. A declared length now holds only what comes.
    #[tokio::test]
    async fn a_declared_length_holds_only_what_arrives() {
        let budget = BodyBudget::new(64 << 20);
        let mut idle = Vec::new();
        let mut asked = Vec::new();
        for declared in [25 << 20, 25 << 20, 8 << 20, 4 << 20, 2 << 20] {
            let budget = budget.clone();
            let (polled, waiting) = tokio::sync::oneshot::channel();
            asked.push(waiting);
            idle.push(tokio::spawn(async move {
                let body = Body::new(Promised(declared, Some(polled)));
                read(body, 32 << 20, &budget, soon()).await
            }));
        }
        // Every read is waiting for its first byte: whatever it holds for
        // its declared length, it holds now.
        for waiting in asked {
            waiting_for_more(waiting).await;
        }
        assert!(
            budget.available() == 64 << 20,
            "{} bytes held by bodies that sent nothing",
            (64 << 20) - budget.available()
        );
        // A real delivery still fits.
        let body = read(Body::from(vec![b'x'; 1 << 20]), 32 << 20, &budget, soon()).await;
        assert_eq!(body.unwrap().len(), 1 << 20);
        for task in idle {
            task.abort();
        }
    }

    #[tokio::test]
    async fn a_declared_body_that_comes_is_held_as_it_grows_and_not_past_its_length() {
        let budget = BodyBudget::new(10 << 20);
        let body = read(Body::from(vec![b'x'; 3 << 20]), 8 << 20, &budget, soon())
            .await
            .unwrap();
        assert_eq!(body.len(), 3 << 20);
        // Held: its length (and one chunk's keep), never a buffer ahead.
        assert_eq!(budget.available(), (10 << 20) - (3 << 20) - CHUNK_OVERHEAD);
    }

    /// Red-team round 3: bodies that sent a little over 2 MiB and
    /// stalled held twice that (their buffers grew ahead of them); 13 of
    /// them and 250 idle connections made every signed delivery 503.
    #[tokio::test]
    async fn a_body_that_stalls_halfway_holds_what_it_sent() {
        let budget = BodyBudget::new(64 << 20);
        let sent = (2 << 20) + 1;
        let (polled, waiting) = tokio::sync::oneshot::channel();
        let stalls = Body::from_stream(
            stream::iter([Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![
                b'x';
                sent
            ]))])
            .chain(then_waits(polled)),
        );
        let task = {
            let budget = budget.clone();
            tokio::spawn(async move { read(stalls, 32 << 20, &budget, soon()).await })
        };
        waiting_for_more(waiting).await;
        assert_eq!((64 << 20) - budget.available(), sent + CHUNK_OVERHEAD);
        task.abort();
    }

    /// Red-team round 4: a body sent one byte a chunk was held at 65
    /// bytes a byte; 1 MiB of body filled the 64 MiB budget.
    #[tokio::test]
    async fn a_body_sent_a_byte_a_chunk_holds_about_what_it_sent() {
        let budget = BodyBudget::new(64 << 20);
        let sent = 100_000usize;
        let (polled, waiting) = tokio::sync::oneshot::channel();
        let bytes = stream::iter(
            (0..sent).map(|_| Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"x"))),
        )
        .chain(then_waits(polled));
        let task = {
            let budget = budget.clone();
            tokio::spawn(
                async move { read(Body::from_stream(bytes), 32 << 20, &budget, soon()).await },
            )
        };
        // All 100,000 bytes are in: the read asks for the next one.
        waiting_for_more(waiting).await;
        let held = (64 << 20) - budget.available();
        assert!(
            held >= sent && held <= 2 * sent + 4096,
            "{held} bytes held for {sent} sent"
        );
        task.abort();
    }

    /// Found by the payload suite: a large chunk after small ones was
    /// put before them, and the signature no longer matched.
    #[tokio::test]
    async fn chunks_small_and_large_come_out_in_order() {
        let parts: Vec<Vec<u8>> = vec![
            b"head-".to_vec(),
            vec![b'a'; SMALL_CHUNK + 3],
            b"-middle-".to_vec(),
            vec![b'b'; 2 * SMALL_CHUNK],
            vec![b'c'; SMALL_CHUNK - 1],
            vec![b'd'; 2],
            b"-tail".to_vec(),
        ];
        let whole = parts.concat();
        let body = Body::from_stream(stream::iter(
            parts
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(axum::body::Bytes::from(p))),
        ));
        let budget = BodyBudget::new(1 << 20);
        let read = read(body, 1 << 20, &budget, soon()).await.unwrap();
        assert!(*read == whole[..], "the body came out in another order");
    }

    #[tokio::test]
    async fn a_body_that_stalls_times_out() {
        let budget = BodyBudget::new(1000);
        let stalled =
            Body::from_stream(stream::pending::<Result<axum::body::Bytes, std::io::Error>>());
        let deadline = Instant::now() + Duration::from_millis(50);
        let read = read(stalled, 100, &budget, deadline).await;
        assert_eq!(read.err(), Some(BodyError::TimedOut));
        assert_eq!(budget.available(), 1000);
    }
}
