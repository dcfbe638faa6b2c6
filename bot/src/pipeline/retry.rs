//! Forge calls that a passing fault should not end a job for: a 5xx or a
//! rate limit is waited out and the call made again, a few times.

use std::future::Future;
use std::time::Duration;

use forgehand_forge::api::ForgeError;
use tracing::warn;

/// How many times a call is made in all.
const ATTEMPTS: u32 = 4;
/// The longest wait for a rate limit: longer ones fail the attempt, and
/// the queue's backoff takes over.
const LONGEST_WAIT: Duration = Duration::from_secs(60);

/// Runs `call` until it succeeds, fails for a reason waiting cannot fix,
/// or has been made [`ATTEMPTS`] times. Only for calls that are safe to
/// repeat: reads, edits, and creations that look for what an earlier try
/// made (a pull request is found by its branch first).
pub async fn retrying<T, F, Fut>(mut call: F) -> Result<T, ForgeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ForgeError>>,
{
    let mut attempt = 1;
    loop {
        let error = match call().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let wait = match &error {
            ForgeError::RateLimited { retry_after } if *retry_after <= LONGEST_WAIT => *retry_after,
            ForgeError::Other(_) => Duration::from_millis(250 << attempt),
            _ => return Err(error),
        };
        if attempt >= ATTEMPTS {
            return Err(error);
        }
        warn!(%error, attempt, wait_ms = wait.as_millis() as u64, "forge call failed; trying again");
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn server_errors_and_rate_limits_are_waited_out() {
        let calls = AtomicU32::new(0);
        let result = retrying(|| async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(ForgeError::Other("HTTP 502: bad gateway".into())),
                1 => Err(ForgeError::RateLimited {
                    retry_after: Duration::from_secs(7),
                }),
                _ => Ok("made"),
            }
        })
        .await;
        assert_eq!(result.unwrap(), "made");
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn what_waiting_cannot_fix_fails_at_once() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = retrying(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ForgeError::Forbidden("no".into()))
        })
        .await;
        assert!(matches!(result, Err(ForgeError::Forbidden(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn it_gives_up_after_four_tries() {
        let calls = AtomicU32::new(0);
        let result: Result<(), _> = retrying(|| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(ForgeError::Other("HTTP 500".into()))
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), ATTEMPTS);
    }
}
