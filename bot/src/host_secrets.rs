//! The host's own credentials, by name: searched for in what the agent
//! changed, replaced in transcripts, and redacted from every text sent to
//! the forge. The agent never holds them, but it reads and writes text
//! that could: a credential must not leave by way of a comment.

use secrecy::{ExposeSecret, SecretString};

use crate::config::Config;

/// Every credential in `config`: the forges' tokens and webhook secrets,
/// the model's API key, the operator API token, and a GitHub App's
/// private key (whole, and each line of its body, so a line quoted on its
/// own is found too). An App key that cannot be read is left out here:
/// the forge client refuses to start without it anyway.
pub fn host_secrets(config: &Config) -> Vec<(String, SecretString)> {
    let mut out = Vec::new();
    let mut one = |name: &str, secret: &SecretString| out.push((name.to_owned(), secret.clone()));
    if let Some(key) = &config.model.api_key {
        one("model.api_key", key);
    }
    if let Some(token) = &config.api.token {
        one("api.token", token);
    }
    for secret in url_password(&config.database.url) {
        one("database.url", &secret);
    }
    // What the URL leaves out, PostgreSQL's own variable may hold.
    if let Some(password) = std::env::var("PGPASSWORD").ok().filter(|p| !p.is_empty()) {
        one("PGPASSWORD", &SecretString::from(password));
    }
    if let Some(token) = &config.github.token {
        one("github.token", token);
    }
    if let Some(token) = &config.gitea.token {
        one("gitea.token", token);
    }
    for secret in &config.github.webhook_secret {
        one("github.webhook_secret", secret);
    }
    for secret in &config.gitea.webhook_secret {
        one("gitea.webhook_secret", secret);
    }
    if let Some(pem) = config
        .github
        .private_key_path
        .as_ref()
        .and_then(|path| std::fs::read_to_string(path).ok())
    {
        let name = "github.private_key_path";
        for line in pem
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("-----"))
        {
            out.push((name.to_owned(), SecretString::from(line.to_owned())));
        }
        out.push((name.to_owned(), SecretString::from(pem)));
    }
    // The longest first: a secret that contains another is replaced whole.
    out.sort_by_key(|(_, s)| std::cmp::Reverse(s.expose_secret().len()));
    out
}

/// A database URL's password, as written (percent-encoded) and as sent.
pub fn url_password(url: &str) -> Vec<SecretString> {
    let Some(password) = reqwest::Url::parse(url)
        .ok()
        .and_then(|url| url.password().map(str::to_owned))
        .filter(|p| !p.is_empty())
    else {
        return Vec::new();
    };
    let decoded = percent_decode(&password);
    let mut out = vec![SecretString::from(password.clone())];
    if decoded != password {
        out.push(SecretString::from(decoded));
    }
    out
}

/// `%XX` sequences decoded (a URL's password as the server receives it).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        if bytes[i] == b'%' {
            if let Some(Ok(byte)) = hex.map(|h| u8::from_str_radix(h, 16)) {
                out.push(byte);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_credential_of_the_configuration_is_listed_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("app.pem");
        std::fs::write(
            &key,
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAline1\nc2Vjb25kbGluZTI=\n-----END RSA PRIVATE KEY-----\n",
        )
        .unwrap();
        let env = [
            ("FORGEHAND_MODEL__API_KEY", "model-key-1234"),
            ("FORGEHAND_API__TOKEN", "api-token-1234"),
            ("FORGEHAND_GITEA__TOKEN", "gitea-token-1234"),
            ("FORGEHAND_GITEA__BASE_URL", "http://127.0.0.1:1"),
            (
                "FORGEHAND_GITHUB__WEBHOOK_SECRET",
                "hook-a-1234,hook-b-1234",
            ),
            ("FORGEHAND_GITHUB__APP_ID", "1"),
            ("FORGEHAND_GITHUB__PRIVATE_KEY_PATH", key.to_str().unwrap()),
        ];
        let config = Config::load_from(
            None,
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .unwrap();
        let listed: Vec<(String, String)> = host_secrets(&config)
            .into_iter()
            .map(|(n, s)| (n, s.expose_secret().to_owned()))
            .collect();
        for (name, value) in [
            ("model.api_key", "model-key-1234"),
            ("api.token", "api-token-1234"),
            ("gitea.token", "gitea-token-1234"),
            ("github.webhook_secret", "hook-a-1234"),
            ("github.webhook_secret", "hook-b-1234"),
            ("github.private_key_path", "MIIEowIBAAKCAQEAline1"),
            ("github.private_key_path", "c2Vjb25kbGluZTI="),
        ] {
            assert!(
                listed.contains(&(name.to_owned(), value.to_owned())),
                "{name} is missing"
            );
        }
        assert!(listed
            .iter()
            .any(|(n, v)| n == "github.private_key_path" && v.starts_with("-----BEGIN")));
    }
}
