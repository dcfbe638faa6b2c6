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
    let mut held = Held::none(budget);
    let mut bytes = Vec::new();
    if hint.upper() == Some(hint.lower()) {
        let declared = hint.lower() as usize;
        held.grow_to(declared)?;
        bytes.reserve_exact(declared);
        held.grow_to(bytes.capacity())?;
    }
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
        let len = bytes.len() + data.len();
        if len > limit {
            return Err(BodyError::TooLarge);
        }
        if len > bytes.capacity() {
            // Grown as a Vec grows, but never past the limit; the budget
            // holds what is allocated, not only what is filled.
            let target = (bytes.capacity() * 2).max(len).min(limit);
            held.grow_to(target)?;
            bytes.reserve_exact(target - bytes.len());
            held.grow_to(bytes.capacity())?;
        }
        bytes.extend_from_slice(&data);
    }
    Ok(HeldBody { bytes, _held: held })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::stream;

    use super::*;

    fn chunked(chunks: Vec<&'static [u8]>) -> Body {
        Body::from_stream(stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(axum::body::Bytes::from_static(c))),
        ))
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn a_body_is_held_against_the_budget_while_it_lives() {
        let budget = BodyBudget::new(100);
        let body = read(Body::from(vec![b'x'; 60]), 80, &budget, soon())
            .await
            .unwrap();
        assert_eq!(body.len(), 60);
        assert_eq!(budget.available(), 40);
        // A second one does not fit beside it.
        let second = read(Body::from(vec![b'x'; 60]), 80, &budget, soon()).await;
        assert_eq!(second.err(), Some(BodyError::Busy));
        drop(body);
        assert_eq!(budget.available(), 100);
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
