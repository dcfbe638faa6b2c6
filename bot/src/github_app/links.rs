//! One-time set-up links: `forgehand setup github` makes one and prints
//! it; the node serving `server.public_url` takes it once and opens a
//! set-up session for the browser that brought it. Only a digest of each
//! link is kept, in `github.app_dir/links/`, with its expiry.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long a printed link works.
pub const LINK_TTL: Duration = Duration::from_secs(30 * 60);

/// What a link allows: making the App for this account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The App's name (GitHub's names are unique across GitHub).
    pub name: String,
    /// The organization that will own the App; `None`: the person's own
    /// account.
    pub org: Option<String>,
    /// Unix seconds after which the link is refused.
    pub expires_at: i64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LinkError {
    #[error("this set-up link is not valid: it was used already, or made for another Forgehand; run `forgehand setup github` again")]
    Unknown,
    #[error("this set-up link has expired; run `forgehand setup github` again")]
    Expired,
}

fn dir_of(app_dir: &Path) -> PathBuf {
    app_dir.join("links")
}

/// A link's file: the SHA-256 of the token, so that the directory does
/// not hold what opens a session.
fn file_of(app_dir: &Path, token: &str) -> Option<PathBuf> {
    let well_formed = token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit());
    well_formed.then(|| dir_of(app_dir).join(hex(&Sha256::digest(token.as_bytes()))))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Makes a link for an App named `name`, owned by `org` (or the
/// person's own account), good once and for [`LINK_TTL`]; returns its
/// token. Expired links are removed.
pub fn create(app_dir: &Path, name: &str, org: Option<&str>, now: i64) -> std::io::Result<String> {
    let dir = dir_of(app_dir);
    super::private_dir(app_dir)?;
    super::private_dir(&dir)?;
    remove_expired(&dir, now);
    let token = hex(&rand::random::<[u8; 32]>());
    let grant = Grant {
        name: name.to_owned(),
        org: org.map(str::to_owned),
        expires_at: now + LINK_TTL.as_secs() as i64,
    };
    let path = file_of(app_dir, &token).expect("a token of 64 hex digits");
    super::write_private(&path, &serde_json::to_vec(&grant)?)?;
    Ok(token)
}

/// Takes the link: it works once. Only the process that removes its file
/// gets the grant, so two browsers racing with one link get one session.
pub fn consume(app_dir: &Path, token: &str, now: i64) -> Result<Grant, LinkError> {
    let path = file_of(app_dir, token).ok_or(LinkError::Unknown)?;
    let bytes = std::fs::read(&path).map_err(|_| LinkError::Unknown)?;
    std::fs::remove_file(&path).map_err(|_| LinkError::Unknown)?;
    let grant: Grant = serde_json::from_slice(&bytes).map_err(|_| LinkError::Unknown)?;
    if grant.expires_at < now {
        return Err(LinkError::Expired);
    }
    Ok(grant)
}

fn remove_expired(dir: &Path, now: i64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let expired = std::fs::read(entry.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<Grant>(&b).ok())
            .is_none_or(|g| g.expires_at < now);
        if expired {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_works_once_and_only_until_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let token = create(dir.path(), "fh", Some("acme"), 1_000).unwrap();
        assert_eq!(token.len(), 64);
        let grant = consume(dir.path(), &token, 1_001).unwrap();
        assert_eq!(grant.org.as_deref(), Some("acme"));
        assert_eq!(consume(dir.path(), &token, 1_002), Err(LinkError::Unknown));

        let token = create(dir.path(), "fh", None, 1_000).unwrap();
        let late = 1_000 + LINK_TTL.as_secs() as i64 + 1;
        assert_eq!(consume(dir.path(), &token, late), Err(LinkError::Expired));
    }

    #[test]
    fn only_a_digest_is_kept_and_odd_tokens_are_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let token = create(dir.path(), "fh", None, 0).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path().join("links"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1);
        assert_ne!(names[0], token, "the token itself is not stored");
        for odd in ["", "../../etc/passwd", &names[0][..63], &"z".repeat(64)] {
            assert_eq!(
                consume(dir.path(), odd, 1),
                Err(LinkError::Unknown),
                "{odd}"
            );
        }
        // The stored digest is not a token either.
        assert_eq!(consume(dir.path(), &names[0], 1), Err(LinkError::Unknown));
        assert!(consume(dir.path(), &token, 1).is_ok());
    }

    #[test]
    fn the_directories_are_the_owners_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let app_dir = dir.path().join("github-app");
        create(&app_dir, "fh", None, 0).unwrap();
        for d in [app_dir.clone(), app_dir.join("links")] {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        for f in std::fs::read_dir(app_dir.join("links")).unwrap() {
            let mode = f.unwrap().metadata().unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }
}
