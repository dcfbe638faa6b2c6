//! npm's registry: `npm config get registry`, which is its configuration
//! (`.npmrc` files, `npm_config_registry`) or else its built-in default.

use super::command::output;
use super::{Found, Manager};

pub(crate) async fn find() -> Result<Found, String> {
    let stdout = output("npm", &["config", "get", "registry"])
        .await
        .map_err(|note| format!("npm: {note}"))?;
    from_registry_output(&stdout)
}

pub(crate) fn from_registry_output(stdout: &str) -> Result<Found, String> {
    let value = stdout.trim();
    Found::from_url(Manager::Npm, value, "`npm config get registry`").ok_or_else(|| {
        // The value is not shown: a registry URL may carry a token.
        "npm: `npm config get registry` did not print an http(s) URL".to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_url_gives_its_host() {
        let found = from_registry_output("https://registry.invalid/\n").unwrap();
        assert_eq!((found.host.as_str(), found.port), ("registry.invalid", 443));
        assert_eq!(found.source, "`npm config get registry`");
        let error = from_registry_output("undefined\n").unwrap_err();
        assert!(error.contains("did not print"), "{error}");
    }
}
