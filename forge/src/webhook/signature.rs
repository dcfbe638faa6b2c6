//! HMAC-SHA256 webhook signatures, checked in constant time against every
//! configured secret so that secrets can be rotated without downtime.

use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the delivery carries no signature header ({0})")]
    Missing(&'static str),
    #[error("the signature header is not hex-encoded SHA-256")]
    Malformed,
    #[error("the signature does not match any configured secret")]
    Mismatch,
    #[error("no webhook secret is configured for this forge")]
    NoSecretConfigured,
}

/// Decodes a signature header value: GitHub's `sha256=<hex>` when
/// `prefixed`, Gitea's and Forgejo's bare hex otherwise.
pub fn decode_signature(value: &str, prefixed: bool) -> Result<[u8; 32], SignatureError> {
    let hex_part = if prefixed {
        value
            .trim()
            .strip_prefix("sha256=")
            .ok_or(SignatureError::Malformed)?
    } else {
        value.trim()
    };
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_part, &mut out).map_err(|_| SignatureError::Malformed)?;
    Ok(out)
}

/// True when `signature` is the HMAC-SHA256 of `body` under one of
/// `secrets`. Each comparison is constant-time; every secret is tried so
/// the time taken does not tell which one matched.
pub fn verify(
    body: &[u8],
    signature: &[u8; 32],
    secrets: &[SecretString],
) -> Result<(), SignatureError> {
    if secrets.is_empty() {
        return Err(SignatureError::NoSecretConfigured);
    }
    let mut matched = false;
    for secret in secrets {
        let mut mac = HmacSha256::new_from_slice(secret.expose_secret().as_bytes())
            .expect("HMAC accepts keys of any length");
        mac.update(body);
        matched |= mac.verify_slice(signature).is_ok();
    }
    if matched {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// The hex signature of `body` under `secret`, as a forge would send it
/// (without GitHub's `sha256=` prefix). Used by tests, benches and fakes.
pub fn sign_hex(secret: &[u8], body: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(list: &[&str]) -> Vec<SecretString> {
        list.iter()
            .map(|s| SecretString::from(s.to_string()))
            .collect()
    }

    #[test]
    fn rotation_accepts_any_configured_secret() {
        let body = b"{}";
        let sig = decode_signature(&sign_hex(b"new", body), false).unwrap();
        assert_eq!(verify(body, &sig, &secrets(&["old", "new"])), Ok(()));
        assert_eq!(
            verify(body, &sig, &secrets(&["old"])),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn prefix_is_required_where_the_forge_sends_it() {
        let hex = sign_hex(b"s", b"x");
        assert!(decode_signature(&hex, true).is_err());
        assert!(decode_signature(&format!("sha256={hex}"), true).is_ok());
        assert_eq!(
            decode_signature("sha256=zz", true),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            decode_signature(&hex[..10], false),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn no_secret_is_never_a_pass() {
        let sig = [0u8; 32];
        assert_eq!(
            verify(b"", &sig, &[]),
            Err(SignatureError::NoSecretConfigured)
        );
    }
}
