//! The webhook secrets an endpoint checks signatures against. They can
//! grow while the server runs: the GitHub App that the set-up page
//! creates brings a secret of its own, used from the next delivery on.

use std::sync::{Arc, RwLock};

use secrecy::{ExposeSecret, SecretString};

#[derive(Clone, Default)]
pub struct SecretSet(Arc<RwLock<Arc<Vec<SecretString>>>>);

impl SecretSet {
    pub fn new(secrets: Vec<SecretString>) -> Self {
        SecretSet(Arc::new(RwLock::new(Arc::new(secrets))))
    }

    /// The secrets now: a snapshot, held for one delivery.
    pub fn current(&self) -> Arc<Vec<SecretString>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Adds `secret` unless it is there already.
    pub fn add(&self, secret: SecretString) {
        let mut guard = self.0.write().unwrap_or_else(|e| e.into_inner());
        if guard
            .iter()
            .any(|s| s.expose_secret() == secret.expose_secret())
        {
            return;
        }
        let mut next = guard.as_ref().clone();
        next.push(secret);
        *guard = Arc::new(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_added_is_seen_by_the_next_snapshot_and_not_twice() {
        let set = SecretSet::new(vec![SecretString::from("a")]);
        let before = set.current();
        set.add(SecretString::from("b"));
        set.add(SecretString::from("b"));
        assert_eq!(before.len(), 1, "a snapshot taken before stays as it was");
        let now = set.current();
        let now: Vec<&str> = now.iter().map(|s| s.expose_secret()).collect();
        assert_eq!(now, ["a", "b"]);
    }
}
