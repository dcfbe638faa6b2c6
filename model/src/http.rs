//! POSTing JSON to a model server with retries: 429 and 5xx (529 too,
//! Anthropic's "overloaded") and timeouts are tried
//! again after `Retry-After` when the server says, else after an
//! exponential backoff; other answers, and a server that is not there
//! at all, fail at once.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::ModelError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first.
    pub max_retries: u32,
    /// The first backoff; doubled on each further try.
    pub base_delay: Duration,
    /// No wait is longer, whatever `Retry-After` asks.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// The parsed answer and how many tries it took.
pub(super) async fn post_json(
    http: &reqwest::Client,
    url: &str,
    headers: reqwest::header::HeaderMap,
    body: &Value,
    policy: RetryPolicy,
    named: &str,
) -> Result<(Value, u32), ModelError> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let outcome = http
            .post(url)
            .headers(headers.clone())
            .json(body)
            .send()
            .await;
        let (error, retry_after) = match outcome {
            Ok(response) if response.status().is_success() => {
                let text = response.text().await.map_err(|e| {
                    ModelError::Malformed(format!("the body could not be read: {e}"))
                })?;
                let value = serde_json::from_str(&text).map_err(|e| {
                    ModelError::Malformed(format!("not JSON ({e}): {}", excerpt(&text)))
                })?;
                return Ok((value, attempt));
            }
            Ok(response) => {
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                let detail = excerpt(&response.text().await.unwrap_or_default());
                let error = ModelError::Status {
                    url: url.to_owned(),
                    status,
                    detail,
                };
                if !(status == 429 || status == 408 || status >= 500) {
                    return Err(error);
                }
                (error, retry_after)
            }
            // Nothing listening: waiting would only delay telling the user.
            Err(e) if e.is_connect() => {
                return Err(ModelError::Unreachable {
                    url: url.to_owned(),
                    detail: root_cause(&e),
                    named: named.to_owned(),
                })
            }
            Err(e) => (
                ModelError::Status {
                    url: url.to_owned(),
                    status: 0,
                    detail: if e.is_timeout() {
                        "no answer within model.timeout_secs".into()
                    } else {
                        root_cause(&e)
                    },
                },
                None,
            ),
        };
        if attempt > policy.max_retries {
            return Err(ModelError::Exhausted {
                attempts: attempt,
                last: Box::new(error),
            });
        }
        let backoff = policy
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt - 1));
        let wait = retry_after.unwrap_or(backoff).min(policy.max_delay);
        tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, %error, "model call failed; trying again");
        tokio::time::sleep(wait).await;
    }
}

/// `Retry-After`: seconds, or an HTTP date.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds >= 0.0 && seconds.is_finite()).then(|| Duration::from_secs_f64(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

pub(super) fn root_cause(error: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = error;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

/// At most 300 characters of a body, for error messages.
fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("soon"), None);
        // A date is a whole second: the wait runs from when it is read to
        // that second, however long this thread was kept from running.
        let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        let named = httpdate::parse_http_date(&date).unwrap();
        let before = SystemTime::now();
        let wait = parse_retry_after(&date).unwrap();
        let after = SystemTime::now();
        let until = |from: SystemTime| named.duration_since(from).unwrap_or(Duration::ZERO);
        assert!(
            wait >= until(after) && wait <= until(before),
            "{wait:?} to {date}"
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
    }
}
