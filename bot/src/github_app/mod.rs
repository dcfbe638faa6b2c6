//! The GitHub App `forgehand setup github` created, kept on disk beside
//! the one-time set-up links: `github.app_dir` (0700) holds `app.toml`
//! (its id, names and webhook secret) and `private-key.pem`, both 0600.
//! A node whose configuration names no other GitHub credential uses it,
//! at start and, on the node that served the set-up, at once.

pub mod links;

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use forgehand_forge::admin::github::CreatedApp;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::config::GitHubConfig;

const APP_FILE: &str = "app.toml";
const KEY_FILE: &str = "private-key.pem";

/// The App as stored.
#[derive(Clone)]
pub struct StoredApp {
    pub id: u64,
    pub slug: String,
    pub name: String,
    /// `https://github.com/apps/<slug>`.
    pub html_url: String,
    /// The account that owns it (a user or an organization).
    pub owner: String,
    pub webhook_secret: Option<SecretString>,
    pub key_path: PathBuf,
}

impl std::fmt::Debug for StoredApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredApp")
            .field("id", &self.id)
            .field("slug", &self.slug)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl StoredApp {
    /// Where people install it on their repositories.
    pub fn install_url(&self) -> String {
        format!("{}/installations/new", self.html_url.trim_end_matches('/'))
    }

    /// The login its comments are signed with.
    pub fn bot_login(&self) -> String {
        format!("{}[bot]", self.slug)
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppFile {
    id: u64,
    slug: String,
    name: String,
    html_url: String,
    owner: String,
    webhook_secret: Option<String>,
}

/// The stored App, if `dir` holds one. Files others could read are
/// refused: they hold the App's identity.
pub fn load(dir: &Path) -> Result<Option<StoredApp>, String> {
    let path = dir.join(APP_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let key_path = dir.join(KEY_FILE);
    for file in [&path, &key_path] {
        let mode = std::fs::metadata(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "{} is readable by others (mode {:o}): chmod 600 it",
                file.display(),
                mode & 0o777
            ));
        }
    }
    let file: AppFile =
        toml::from_str(&text).map_err(|e| format!("{} is not an App file: {e}", path.display()))?;
    Ok(Some(StoredApp {
        id: file.id,
        slug: file.slug,
        name: file.name,
        html_url: file.html_url,
        owner: file.owner,
        webhook_secret: file.webhook_secret.map(SecretString::from),
        key_path,
    }))
}

/// Stores a newly created App: the key first, then `app.toml`, each
/// written to a temporary file and renamed, so that a reader sees the App
/// whole or not at all.
pub fn save(dir: &Path, app: &CreatedApp) -> std::io::Result<StoredApp> {
    private_dir(dir)?;
    let key_path = dir.join(KEY_FILE);
    write_private(&key_path, app.pem.expose_secret().as_bytes())?;
    let file = AppFile {
        id: app.id,
        slug: app.slug.clone(),
        name: app.name.clone(),
        html_url: app.html_url.clone(),
        owner: app.owner.clone(),
        webhook_secret: app
            .webhook_secret
            .as_ref()
            .map(|s| s.expose_secret().to_owned()),
    };
    let text = toml::to_string(&file).map_err(std::io::Error::other)?;
    write_private(&dir.join(APP_FILE), text.as_bytes())?;
    Ok(StoredApp {
        id: app.id,
        slug: app.slug.clone(),
        name: app.name.clone(),
        html_url: app.html_url.clone(),
        owner: app.owner.clone(),
        webhook_secret: app.webhook_secret.clone(),
        key_path,
    })
}

/// Creates `dir` (and its parents) and makes it 0700.
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Writes `bytes` to `path` through a 0600 temporary file and a rename.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// Puts the stored App into `github` when the configuration names no
/// other credential (no token, no `app_id`): its id, its key, and its
/// webhook secret beside any configured ones.
pub fn adopt(github: &mut GitHubConfig) -> Result<Option<StoredApp>, String> {
    if github.token.is_some() || github.app_id.is_some() {
        return Ok(None);
    }
    let Some(app) = load(&github.app_dir).map_err(|e| format!("github.app_dir: {e}"))? else {
        return Ok(None);
    };
    apply(github, &app);
    Ok(Some(app))
}

/// Sets `github` to sign in as `app`.
pub fn apply(github: &mut GitHubConfig, app: &StoredApp) {
    github.app_id = Some(app.id);
    github.private_key_path = Some(app.key_path.clone());
    if let Some(secret) = &app.webhook_secret {
        let known = github
            .webhook_secret
            .iter()
            .any(|s| s.expose_secret() == secret.expose_secret());
        if !known {
            github.webhook_secret.push(secret.clone());
        }
    }
}

/// The configuration's warnings, with the stored App's: a configuration
/// reads no stored App itself.
pub fn warnings(config: &crate::config::Config) -> Vec<String> {
    let mut warnings = config.warnings();
    warnings.extend(shadowed(&config.github));
    warnings
}

/// A warning when an App is stored but the configuration names other
/// credentials, which win.
pub fn shadowed(github: &GitHubConfig) -> Option<String> {
    let stored = load(&github.app_dir).ok().flatten()?;
    if github.app_id == Some(stored.id) {
        return None;
    }
    Some(format!(
        "the GitHub App {} (id {}) that forgehand setup stored in {} is not used: the configuration sets {}",
        stored.slug,
        stored.id,
        github.app_dir.display(),
        if github.token.is_some() {
            "github.token"
        } else {
            "github.app_id"
        }
    ))
}

#[cfg(test)]
mod tests;
