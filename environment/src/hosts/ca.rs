//! The CA bundle this host's package managers trust beyond their built-in
//! one: on a network whose proxy inspects TLS, the setup's pip and npm
//! (which trust only the guest image's roots) fail with
//! `SELF_SIGNED_CERT_IN_CHAIN` unless `environment.ca_bundle` names it.
//! Read from where the managers themselves read it: pip's `cert`
//! setting (`pip config get global.cert`, `PIP_CERT`), npm's `cafile`,
//! `NODE_EXTRA_CA_CERTS`, `REQUESTS_CA_BUNDLE` and `SSL_CERT_FILE`.

use std::path::{Path, PathBuf};

use super::command::output;

/// A CA bundle in use on this host, and who named it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CaBundle {
    pub path: PathBuf,
    pub source: String,
}

/// The variables that name a bundle, in the order they are asked.
const VARIABLES: [&str; 4] = [
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
];

/// The first bundle a package manager or the environment names that is a
/// readable PEM file holding at least one certificate.
pub(crate) async fn find(env: &(dyn Fn(&str) -> Option<String> + Sync)) -> Option<CaBundle> {
    let mut candidates: Vec<(String, String)> = Vec::new();
    if let Ok(value) = output("python3", &["-m", "pip", "config", "get", "global.cert"]).await {
        candidates.push((value.trim().to_owned(), "pip's `cert` setting".into()));
    }
    if let Ok(value) = output("npm", &["config", "get", "cafile"]).await {
        candidates.push((value.trim().to_owned(), "npm's `cafile` setting".into()));
    }
    for name in VARIABLES {
        if let Some(value) = env(name) {
            candidates.push((value, format!("${name}")));
        }
    }
    candidates
        .into_iter()
        .filter(|(value, _)| !value.is_empty() && value != "null" && value != "undefined")
        .map(|(value, source)| (PathBuf::from(value), source))
        .find(|(path, _)| is_bundle(path))
        .map(|(path, source)| CaBundle { path, source })
}

/// Whether `path` is an absolute path to a small PEM file with a
/// certificate in it.
fn is_bundle(path: &Path) -> bool {
    if !path.is_absolute() {
        return false;
    }
    match super::read_config(path) {
        Ok(Some(text)) => text.contains("-----BEGIN CERTIFICATE-----"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_bundle_named_by_a_variable_is_proposed_when_it_holds_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("corporate.pem");
        std::fs::write(
            &good,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "nothing").unwrap();
        let (good_s, empty_s) = (good.display().to_string(), empty.display().to_string());
        let env = move |name: &str| match name {
            "NODE_EXTRA_CA_CERTS" => Some(empty_s.clone()),
            "REQUESTS_CA_BUNDLE" => Some(good_s.clone()),
            _ => None,
        };
        // pip and npm on this host may name one first; if not, the
        // variables decide.
        let found = find(&env).await.unwrap();
        if found.source.starts_with('$') {
            assert_eq!(found.path, good);
            assert_eq!(found.source, "$REQUESTS_CA_BUNDLE");
        }
        assert!(is_bundle(&found.path));
        assert!(!is_bundle(&empty));
        assert!(!is_bundle(Path::new("relative.pem")));
    }
}
