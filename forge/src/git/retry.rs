//! Git's network calls made again when a passing fault ended them, as the
//! forge's API calls are (`api/retrying.rs`, whose [`RetryPolicy`] this
//! shares): a 5xx or a 408 on `info/refs` or on the pack exchange, a 429,
//! a dropped or silent connection, waited out with a doubling backoff a
//! few times within the attempt. What waiting cannot fix fails at once:
//! refused credentials, a host key that is not the pinned one, a push the
//! server refused (a protected branch, a hook), a repository that is not
//! there, anything local.
//!
//! libgit2 keeps a 429's `Retry-After` to itself (its error says only
//! "unexpected http status code: 429"), so a rate limit is waited out
//! with the same doubling backoff, starting at a second instead of
//! [`RetryPolicy::first_backoff`].
//!
//! A failure names the call and the remote without credentials
//! (`git fetch https://example.org/o/r.git: …`): the URL's user info,
//! query and fragment never reach an error or a log line.

use std::time::Duration;

use tracing::{info, warn};

pub use super::transport::GitCall;
use super::transport::TransportError;
use crate::api::RetryPolicy;

/// How a failed try reads to the retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Waiting could fix it: a server error, the network.
    Passing,
    /// A 429: waiting is what the server asked for.
    RateLimited,
    /// Waiting cannot fix it.
    Lasting,
}

impl TransportError {
    /// Whether trying again later could succeed: a server error, a rate
    /// limit, the network. Refused credentials, host keys and pushes,
    /// missing repositories and local errors stay as they are.
    pub fn is_transient(&self) -> bool {
        self.fault() != Fault::Lasting
    }

    fn fault(&self) -> Fault {
        match self {
            TransportError::Git(error) => fault_of(error),
            TransportError::Call { cause, .. } => cause.fault(),
            TransportError::Auth(_)
            | TransportError::HostKeyMismatch { .. }
            | TransportError::NoPinnedHostKey { .. }
            | TransportError::Rejected(_) => Fault::Lasting,
        }
    }

    /// This error as a failure of `call` on `remote` after `tries` tries;
    /// an error that already names its call (one step of a larger unit,
    /// like the push's `ls-remote`) keeps its name and gets the count.
    fn named(self, call: GitCall, remote: &str, tries: u32) -> TransportError {
        match self {
            TransportError::Call {
                call,
                remote,
                cause,
                ..
            } => TransportError::Call {
                call,
                remote,
                tries,
                cause,
            },
            cause => TransportError::Call {
                call,
                remote: remote.to_owned(),
                tries,
                cause: Box::new(cause),
            },
        }
    }

    /// This error as a failure of `call`, one step of a larger call that
    /// is retried as a whole (the push's `ls-remote`).
    pub(super) fn during(self, call: GitCall, remote: &str) -> TransportError {
        self.named(call, remote, 1)
    }

    /// What went wrong underneath the call's name and count.
    pub fn root(&self) -> &TransportError {
        match self {
            TransportError::Call { cause, .. } => cause.root(),
            other => other,
        }
    }
}

/// libgit2's errors by what they say: its HTTP client reports a status it
/// did not expect as "unexpected http status code: N"; the network (a
/// socket, a truncated stream) under the `Net` class, except what the
/// server itself said (`remote error: …`, a push's report).
fn fault_of(error: &git2::Error) -> Fault {
    use git2::{ErrorClass, ErrorCode};
    let message = error.message();
    match (error.code(), error.class()) {
        (ErrorCode::Auth | ErrorCode::Certificate, _) => Fault::Lasting,
        (ErrorCode::Timeout, _) => Fault::Passing,
        (_, ErrorClass::Http) => match http_status(message) {
            Some(429) => Fault::RateLimited,
            Some(408 | 500..=599) => Fault::Passing,
            Some(_) => Fault::Lasting,
            // The connection went before the answer was whole.
            None if message.starts_with("unexpected EOF")
                || message.starts_with("http parser error")
                || message.starts_with("truncated write") =>
            {
                Fault::Passing
            }
            None => Fault::Lasting,
        },
        (_, ErrorClass::Net) => {
            let said_by_server = ["remote error:", "report-status:", "server doesn't support"]
                .iter()
                .any(|p| message.starts_with(p));
            if said_by_server {
                Fault::Lasting
            } else {
                Fault::Passing
            }
        }
        (_, ErrorClass::Os) if message.starts_with("failed to connect") => Fault::Passing,
        (_, ErrorClass::Ssh) => Fault::Passing,
        _ => Fault::Lasting,
    }
}

fn http_status(message: &str) -> Option<u16> {
    message
        .strip_prefix("unexpected http status code: ")?
        .trim()
        .parse()
        .ok()
}

/// How long to wait before try `tries + 1`, or `None` when waiting
/// cannot help.
fn wait(policy: &RetryPolicy, error: &TransportError, tries: u32) -> Option<Duration> {
    let first = match error.fault() {
        Fault::Lasting => return None,
        Fault::Passing => policy.first_backoff,
        Fault::RateLimited => policy.first_backoff.max(Duration::from_secs(1)),
    };
    Some(
        first
            .saturating_mul(1 << (tries - 1).min(16))
            .min(policy.longest_wait),
    )
}

/// Runs `once` until it succeeds, fails for a reason waiting cannot fix,
/// or has been tried [`RetryPolicy::attempts`] times; its error then names
/// `call`, the remote and the count. `once` must be safe to repeat: a push
/// checks first whether an earlier try landed.
pub fn retried<T>(
    policy: &RetryPolicy,
    call: GitCall,
    url: &str,
    mut once: impl FnMut() -> Result<T, TransportError>,
) -> Result<T, TransportError> {
    let remote = remote_name(url);
    let mut tries = 1;
    loop {
        let error = match once() {
            Ok(value) => {
                if tries > 1 {
                    info!(call = call.name(), %remote, tries, "git call went through");
                }
                return Ok(value);
            }
            Err(error) => error,
        };
        let Some(wait) = wait(policy, &error, tries) else {
            return Err(error.named(call, &remote, tries));
        };
        if tries >= policy.attempts.max(1) {
            warn!(call = call.name(), %remote, %error, tries, "git call failed; giving up");
            return Err(error.named(call, &remote, tries));
        }
        warn!(
            call = call.name(),
            %remote,
            %error,
            tries,
            wait_ms = wait.as_millis() as u64,
            "git call failed; trying again"
        );
        std::thread::sleep(wait);
        tries += 1;
    }
}

/// `url` as errors and logs show it: scheme, host, port and path, never
/// user info (a token may be written there), a query or a fragment.
pub fn remote_name(url: &str) -> String {
    if let Ok(mut parsed) = url::Url::parse(url) {
        if parsed.has_host() {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            return parsed.to_string();
        }
    }
    // scp-like `user@host:path`, or a local path.
    let rest = url.rsplit_once('@').map_or(url, |(_, rest)| rest);
    rest.split(['?', '#']).next().unwrap_or(rest).to_owned()
}

#[cfg(test)]
mod tests {
    use git2::{ErrorClass, ErrorCode};

    use super::*;

    fn git(code: ErrorCode, class: ErrorClass, message: &str) -> TransportError {
        TransportError::Git(git2::Error::new(code, class, message))
    }

    fn http(message: &str) -> TransportError {
        git(ErrorCode::GenericError, ErrorClass::Http, message)
    }

    #[test]
    fn server_errors_rate_limits_and_the_network_are_worth_another_try() {
        for status in [500, 502, 503, 504, 408] {
            let error = http(&format!("unexpected http status code: {status}"));
            assert_eq!(error.fault(), Fault::Passing, "{status}");
        }
        assert_eq!(
            http("unexpected http status code: 429").fault(),
            Fault::RateLimited
        );
        assert_eq!(http("unexpected EOF").fault(), Fault::Passing);
        for message in [
            "error receiving data from socket: Connection reset by peer",
            "early EOF",
            "could not read from socket: timed out",
        ] {
            let error = git(ErrorCode::GenericError, ErrorClass::Net, message);
            assert!(error.is_transient(), "{message}");
        }
        let timeout = git(
            ErrorCode::Timeout,
            ErrorClass::Net,
            "could not read from socket: timed out",
        );
        assert!(timeout.is_transient());
        let refused = git(
            ErrorCode::GenericError,
            ErrorClass::Os,
            "failed to connect to 127.0.0.1: Connection refused",
        );
        assert!(refused.is_transient());
    }

    #[test]
    fn what_waiting_cannot_fix_fails_at_once() {
        for status in [400, 401, 403, 404, 422] {
            let error = http(&format!("unexpected http status code: {status}"));
            assert!(!error.is_transient(), "{status}");
        }
        let lasting = [
            TransportError::Auth("127.0.0.1 said no".into()),
            TransportError::HostKeyMismatch { host: "h".into() },
            TransportError::NoPinnedHostKey { host: "h".into() },
            TransportError::Rejected("refs/heads/main: protected branch hook declined".into()),
            git(
                ErrorCode::Auth,
                ErrorClass::Http,
                "unexpected authentication failure",
            ),
            git(
                ErrorCode::GenericError,
                ErrorClass::Net,
                "remote error: Repository not found.",
            ),
            git(
                ErrorCode::Locked,
                ErrorClass::Os,
                "failed to lock file 'packed-refs.lock' for writing",
            ),
            TransportError::Git(git2::Error::from_str("not a repository key")),
        ];
        for error in lasting {
            assert!(!error.is_transient(), "{error}");
        }
    }

    #[test]
    fn the_backoff_doubles_from_the_policys_first_wait_and_a_second_for_a_rate_limit() {
        let policy = RetryPolicy {
            attempts: 5,
            first_backoff: Duration::from_millis(250),
            longest_wait: Duration::from_secs(3),
        };
        let server = http("unexpected http status code: 503");
        let waits: Vec<_> = (1..=5)
            .map(|n| wait(&policy, &server, n).unwrap())
            .collect();
        assert_eq!(
            waits,
            [250, 500, 1000, 2000, 3000].map(Duration::from_millis)
        );
        let limited = http("unexpected http status code: 429");
        assert_eq!(wait(&policy, &limited, 1), Some(Duration::from_secs(1)));
        assert_eq!(wait(&policy, &limited, 2), Some(Duration::from_secs(2)));
        assert_eq!(
            wait(&policy, &http("unexpected http status code: 404"), 1),
            None
        );
    }

    #[test]
    fn a_call_is_tried_until_it_goes_through_and_no_more() {
        let policy = RetryPolicy {
            attempts: 3,
            first_backoff: Duration::from_millis(1),
            longest_wait: Duration::from_millis(5),
        };
        let mut tries = 0;
        let got = retried(&policy, GitCall::Fetch, "https://h/o/r.git", || {
            tries += 1;
            if tries < 3 {
                Err(http("unexpected http status code: 502"))
            } else {
                Ok(tries)
            }
        });
        assert_eq!(got.unwrap(), 3);

        let mut tries = 0;
        let error = retried(&policy, GitCall::Fetch, "https://h/o/r.git", || {
            tries += 1;
            Err::<(), _>(http("unexpected http status code: 502"))
        })
        .unwrap_err();
        assert_eq!(tries, 3);
        assert_eq!(
            error.to_string(),
            "git fetch https://h/o/r.git: unexpected http status code: 502 (3 tries)"
        );

        let mut tries = 0;
        let error = retried(&policy, GitCall::Push, "https://h/o/r.git", || {
            tries += 1;
            Err::<(), _>(TransportError::Rejected(
                "refs/heads/main: protected".into(),
            ))
        })
        .unwrap_err();
        assert_eq!(tries, 1, "a refusal is not tried again");
        assert_eq!(
            error.to_string(),
            "git push https://h/o/r.git: the server refused refs/heads/main: protected"
        );
        assert!(matches!(error.root(), TransportError::Rejected(_)));
    }

    #[test]
    fn a_step_of_a_larger_call_keeps_its_own_name() {
        let policy = RetryPolicy {
            attempts: 2,
            first_backoff: Duration::from_millis(1),
            longest_wait: Duration::from_millis(1),
        };
        let error = retried(&policy, GitCall::Push, "https://h/o/r.git", || {
            Err::<(), _>(
                http("unexpected http status code: 500")
                    .during(GitCall::ListRemote, "https://h/o/r.git"),
            )
        })
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "git ls-remote https://h/o/r.git: unexpected http status code: 500 (2 tries)"
        );
    }

    #[test]
    fn the_remote_is_named_without_credentials() {
        assert_eq!(
            remote_name("https://x-access-token:ghs_s3cret@github.com/o/r.git?t=ghs_s3cret#x"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            remote_name("http://127.0.0.1:8080/demo.git"),
            "http://127.0.0.1:8080/demo.git"
        );
        assert_eq!(
            remote_name("ssh://git@127.0.0.1:2222/srv/r.git"),
            "ssh://127.0.0.1:2222/srv/r.git"
        );
        assert_eq!(remote_name("git@github.com:o/r.git"), "github.com:o/r.git");
    }
}
