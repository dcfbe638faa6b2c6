//! Set-up sessions, in memory: a browser that brought a one-time link or
//! the operator token holds one (a cookie); each manifest form it is
//! shown carries a fresh `state`, which GitHub's redirect must bring back.
//! Only digests of the session tokens are kept.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How long a session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(60 * 60);
/// Sessions held at once; the oldest goes first.
const MAX_SESSIONS: usize = 32;

#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<[u8; 32], Session>>,
}

struct Session {
    opened: Instant,
    name: String,
    org: Option<String>,
    /// The state the last form carried; taken when GitHub brings it back.
    state: Option<String>,
}

/// What the manifest form of a session is made of.
pub struct Opened {
    pub name: String,
    pub org: Option<String>,
    pub state: String,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn random() -> String {
    rand::random::<[u8; 32]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Sessions {
    /// A new session for an App named `name` owned by `org` (or the
    /// person); returns the token the browser keeps.
    pub fn open(&self, name: String, org: Option<String>) -> String {
        let token = random();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|_, s| s.opened.elapsed() < SESSION_TTL);
        while open.len() >= MAX_SESSIONS {
            let Some(oldest) = open.iter().min_by_key(|(_, s)| s.opened).map(|(k, _)| *k) else {
                break;
            };
            open.remove(&oldest);
        }
        open.insert(
            digest(&token),
            Session {
                opened: Instant::now(),
                name,
                org,
                state: None,
            },
        );
        token
    }

    /// A fresh state for the session's form; `None` when the session is
    /// unknown or expired.
    pub fn begin(&self, token: &str) -> Option<Opened> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let session = open
            .get_mut(&digest(token))
            .filter(|s| s.opened.elapsed() < SESSION_TTL)?;
        let state = random();
        session.state = Some(state.clone());
        Some(Opened {
            name: session.name.clone(),
            org: session.org.clone(),
            state,
        })
    }

    /// Whether `state` is the one the session's form carried; it is taken
    /// either way, so a state works once.
    pub fn finish(&self, token: &str, state: &str) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let Some(session) = open
            .get_mut(&digest(token))
            .filter(|s| s.opened.elapsed() < SESSION_TTL)
        else {
            return false;
        };
        session
            .state
            .take()
            .is_some_and(|expected| bool::from(expected.as_bytes().ct_eq(state.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_good_for_its_session_and_once() {
        let sessions = Sessions::default();
        let a = sessions.open("fh".into(), None);
        let b = sessions.open("fh".into(), Some("acme".into()));
        let form = sessions.begin(&a).unwrap();
        assert!(!sessions.finish(&b, &form.state), "another session's state");
        assert!(!sessions.finish(&a, "wrong"), "a wrong state is refused…");
        assert!(
            !sessions.finish(&a, &form.state),
            "…and takes the state with it"
        );
        let form = sessions.begin(&a).unwrap();
        assert!(sessions.finish(&a, &form.state));
        assert!(!sessions.finish(&a, &form.state), "once");
        assert!(sessions.begin("unknown").is_none());
        assert_eq!(sessions.begin(&b).unwrap().org.as_deref(), Some("acme"));
    }

    #[test]
    fn sessions_are_bounded() {
        let sessions = Sessions::default();
        let first = sessions.open("fh".into(), None);
        for _ in 0..MAX_SESSIONS {
            sessions.open("fh".into(), None);
        }
        assert!(sessions.begin(&first).is_none(), "the oldest went");
        assert_eq!(sessions.open.lock().unwrap().len(), MAX_SESSIONS);
    }
}
