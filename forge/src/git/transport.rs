//! Talking to the forge's git server from the host, with the host's
//! credentials: HTTPS with a token, or SSH with a key and a pinned host
//! key. Credentials go through libgit2's callbacks only: never into a URL,
//! a git config, a file in the working copy, or a log line.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use git2::{
    CertificateCheckStatus, Cred, CredentialType, FetchOptions, PushOptions, RemoteCallbacks,
};
use secrecy::{ExposeSecret, SecretString};

/// How the host authenticates to a git server.
#[derive(Clone)]
pub enum Credentials {
    /// HTTPS basic auth: a GitHub App installation token (user
    /// `x-access-token`), a personal token, a Gitea token.
    Token {
        username: String,
        token: SecretString,
    },
    /// SSH with a private key, trusting only the pinned host keys.
    SshKey {
        username: String,
        private_key: PathBuf,
        passphrase: Option<SecretString>,
        /// `known_hosts` lines (`host keytype base64`); the server's key
        /// must be one of them. A mismatch is an error, never a prompt.
        known_hosts: Vec<String>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("the git server refused the credentials ({0})")]
    Auth(String),
    #[error("the SSH host key of {host} is not the pinned one: refusing to connect")]
    HostKeyMismatch { host: String },
    #[error("no pinned SSH host key is configured: refusing to trust {host} blindly")]
    NoPinnedHostKey { host: String },
    /// The server took the push but refused to update these refs (a
    /// protected branch, a hook that said no).
    #[error("the server refused {0}")]
    Rejected(String),
    #[error("git: {0}")]
    Git(#[from] git2::Error),
    /// A network call that failed, named with its remote (never its
    /// credentials) and how often it was tried (see [`super::retry`]).
    #[error("{call} {remote}: {}{}", cause_of(cause), tries_note(*tries))]
    Call {
        call: GitCall,
        remote: String,
        tries: u32,
        cause: Box<TransportError>,
    },
}

/// A network call to a git server, as errors and logs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitCall {
    /// The mirror's fetch (its first clone included).
    Fetch,
    /// The push of the bot's branch.
    Push,
    /// Where the server's branches are (the push's lease).
    ListRemote,
}

impl GitCall {
    pub fn name(self) -> &'static str {
        match self {
            GitCall::Fetch => "git fetch",
            GitCall::Push => "git push",
            GitCall::ListRemote => "git ls-remote",
        }
    }
}

impl std::fmt::Display for GitCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The message under a [`TransportError::Call`]: the cause's own, without
/// the `git: ` a bare libgit2 error displays with.
fn cause_of(error: &TransportError) -> String {
    match error {
        TransportError::Git(error) => error.message().to_owned(),
        other => other.to_string(),
    }
}

fn tries_note(tries: u32) -> String {
    if tries > 1 {
        format!(" ({tries} tries)")
    } else {
        String::new()
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Token { username, .. } => f
                .debug_struct("Token")
                .field("username", username)
                .field("token", &"<redacted>")
                .finish(),
            Credentials::SshKey {
                username,
                private_key,
                ..
            } => f
                .debug_struct("SshKey")
                .field("username", username)
                .field("private_key", private_key)
                .finish_non_exhaustive(),
        }
    }
}

/// Why a callback refused, kept so the error says it rather than
/// libgit2's generic message.
#[derive(Default)]
struct Refusal {
    reason: Cell<Option<TransportErrorKind>>,
}

#[derive(Clone, Copy)]
enum TransportErrorKind {
    AuthRetried,
    HostKeyMismatch,
    NoPinnedHostKey,
}

fn callbacks<'a>(credentials: &'a Credentials, refusal: &'a Refusal) -> RemoteCallbacks<'a> {
    let mut callbacks = RemoteCallbacks::new();
    let attempts = Cell::new(0u32);
    callbacks.credentials(move |_url, username_from_url, allowed| {
        // libgit2 asks again after a refusal, for ever: one try only.
        attempts.set(attempts.get() + 1);
        if attempts.get() > 1 {
            refusal.reason.set(Some(TransportErrorKind::AuthRetried));
            return Err(git2::Error::from_str("credentials refused"));
        }
        match credentials {
            Credentials::Token { username, token }
                if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) =>
            {
                Cred::userpass_plaintext(username, token.expose_secret())
            }
            Credentials::SshKey {
                username,
                private_key,
                passphrase,
                ..
            } if allowed.intersects(CredentialType::SSH_KEY | CredentialType::USERNAME) => {
                let user = username_from_url.unwrap_or(username);
                if allowed.contains(CredentialType::USERNAME) {
                    // Asked for the user name first; the key comes next.
                    attempts.set(0);
                    return Cred::username(user);
                }
                Cred::ssh_key(
                    user,
                    None,
                    private_key,
                    passphrase.as_ref().map(|p| p.expose_secret()),
                )
            }
            _ => Err(git2::Error::from_str(
                "the server asks for a kind of credentials this remote is not configured with",
            )),
        }
    });
    callbacks.certificate_check(move |cert, host| match credentials {
        Credentials::SshKey { known_hosts, .. } => {
            let Some(key) = cert.as_hostkey().and_then(|k| k.hostkey()) else {
                return Err(git2::Error::from_str("no SSH host key to check"));
            };
            let pinned = pinned_keys(known_hosts);
            if pinned.is_empty() {
                refusal
                    .reason
                    .set(Some(TransportErrorKind::NoPinnedHostKey));
                return Err(git2::Error::from_str("no pinned host key"));
            }
            if pinned.iter().any(|p| p.as_slice() == key) {
                Ok(CertificateCheckStatus::CertificateOk)
            } else {
                tracing::warn!(host, "SSH host key mismatch");
                refusal
                    .reason
                    .set(Some(TransportErrorKind::HostKeyMismatch));
                Err(git2::Error::from_str("host key mismatch"))
            }
        }
        // HTTPS: libgit2 verifies the certificate against the system's CAs.
        Credentials::Token { .. } => Ok(CertificateCheckStatus::CertificatePassthrough),
    });
    callbacks
}

/// The raw keys of `known_hosts` lines.
fn pinned_keys(lines: &[String]) -> Vec<Vec<u8>> {
    lines
        .iter()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter_map(|blob| base64::engine::general_purpose::STANDARD.decode(blob).ok())
        .collect()
}

fn explain(error: git2::Error, refusal: &Refusal, url: &str) -> TransportError {
    let host = host_of(url);
    match refusal.reason.take() {
        Some(TransportErrorKind::HostKeyMismatch) => TransportError::HostKeyMismatch { host },
        Some(TransportErrorKind::NoPinnedHostKey) => TransportError::NoPinnedHostKey { host },
        Some(TransportErrorKind::AuthRetried) => TransportError::Auth(format!("{host} said no")),
        None if error.code() == git2::ErrorCode::Auth => {
            TransportError::Auth(format!("{host}: {}", error.message()))
        }
        None => TransportError::Git(error),
    }
}

/// The host part of a URL, for messages (never the user info).
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    authority.rsplit('@').next().unwrap_or(authority).to_owned()
}

/// Stops libgit2 from reading the host's own git configuration (system,
/// global, XDG): an operator's `~/.gitconfig` with a `url.*.insteadOf` or
/// a credential helper must not steer what the service does. Done once,
/// before the first use of git in the process; every entry point here
/// calls it.
pub fn isolate_from_host_config() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for level in [
            git2::ConfigLevel::System,
            git2::ConfigLevel::XDG,
            git2::ConfigLevel::Global,
            git2::ConfigLevel::ProgramData,
        ] {
            // SAFETY: changes libgit2's global options; called once, before
            // this process uses git anywhere else (see above).
            if let Err(error) = unsafe { git2::opts::set_search_path(level, "") } {
                tracing::warn!(%error, ?level, "could not stop libgit2 reading host git config");
            }
        }
        // Every git directory the host opens is its own (mirrors, a job's
        // git directory outside its tree, a local repository the operator
        // named); a job's work tree belongs to the sandbox user by design
        // (it writes through an overlay) and holds no `.git`, so nothing
        // of the sandbox's is read as configuration: libgit2's ownership
        // check would only refuse that layout.
        // SAFETY: a global option set once, before git is used elsewhere.
        if let Err(error) = unsafe { git2::opts::set_verify_owner_validation(false) } {
            tracing::warn!(%error, "could not turn libgit2's ownership check off");
        }
    });
}

/// How long to wait for a git server to accept a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a git server may stay silent in the middle of a call (git's
/// servers send a keep-alive every few seconds while they work): longer,
/// and the call fails as a passing fault, to be tried again, instead of
/// holding a worker for ever.
pub const IO_TIMEOUT: Duration = Duration::from_secs(120);

static TIMEOUTS: std::sync::Once = std::sync::Once::new();

/// libgit2 waits for ever by default; every network call here sets
/// [`CONNECT_TIMEOUT`] and [`IO_TIMEOUT`] first (once per process).
fn network_timeouts() {
    TIMEOUTS.call_once(|| set_timeouts(CONNECT_TIMEOUT, IO_TIMEOUT));
}

/// Other timeouts than [`CONNECT_TIMEOUT`] and [`IO_TIMEOUT`], for the
/// whole process (a test of a server that stalls).
pub fn set_network_timeouts(connect: Duration, io: Duration) {
    network_timeouts();
    set_timeouts(connect, io);
}

fn set_timeouts(connect: Duration, io: Duration) {
    let ms = |d: Duration| libc::c_int::try_from(d.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: libgit2's global options, set before the calls that read them
    // (each network call starts here) and only ever to valid values.
    let set = unsafe {
        git2::opts::set_server_connect_timeout_in_milliseconds(ms(connect))
            .and_then(|()| git2::opts::set_server_timeout_in_milliseconds(ms(io)))
    };
    if let Err(error) = set {
        tracing::warn!(%error, "could not set libgit2's network timeouts");
    }
}

/// Fetches `refspecs` from `url` into `repo` (an anonymous remote: nothing
/// about it is written to the repository's config). One try: the calls
/// the pipeline makes are retried (see [`super::retry`]).
pub fn fetch(
    repo: &git2::Repository,
    url: &str,
    refspecs: &[&str],
    credentials: &Credentials,
) -> Result<(), TransportError> {
    isolate_from_host_config();
    network_timeouts();
    let refusal = Refusal::default();
    let mut options = FetchOptions::new();
    options.remote_callbacks(callbacks(credentials, &refusal));
    let mut remote = repo.remote_anonymous(url)?;
    remote
        .fetch(refspecs, Some(&mut options), None)
        .map_err(|e| explain(e, &refusal, url))
}

/// Pushes `refspecs` to `url`. A ref the server refuses is an error. One
/// try: [`super::publish::push_branch`] is the retried push.
pub fn push(
    repo: &git2::Repository,
    url: &str,
    refspecs: &[&str],
    credentials: &Credentials,
) -> Result<(), TransportError> {
    isolate_from_host_config();
    network_timeouts();
    let refusal = Refusal::default();
    let rejected: std::cell::RefCell<Vec<String>> = Default::default();
    let mut callbacks = callbacks(credentials, &refusal);
    callbacks.push_update_reference(|name, status| {
        if let Some(status) = status {
            rejected.borrow_mut().push(format!("{name}: {status}"));
        }
        Ok(())
    });
    {
        let mut options = PushOptions::new();
        options.remote_callbacks(callbacks);
        let mut remote = repo.remote_anonymous(url)?;
        remote
            .push(refspecs, Some(&mut options))
            .map_err(|e| explain(e, &refusal, url))?;
    }
    let rejected = rejected.into_inner();
    if rejected.is_empty() {
        Ok(())
    } else {
        Err(TransportError::Rejected(rejected.join(", ")))
    }
}

/// The branches the server has now (an `ls-remote`), name → commit. One
/// try.
pub fn remote_heads(
    url: &str,
    credentials: &Credentials,
) -> Result<Vec<(String, git2::Oid)>, TransportError> {
    isolate_from_host_config();
    network_timeouts();
    let refusal = Refusal::default();
    let mut remote = git2::Remote::create_detached(url)?;
    let connection = remote
        .connect_auth(
            git2::Direction::Fetch,
            Some(callbacks(credentials, &refusal)),
            None,
        )
        .map_err(|e| explain(e, &refusal, url))?;
    let heads = connection
        .list()?
        .iter()
        .filter(|h| h.name().starts_with("refs/heads/"))
        .map(|h| (h.name().to_owned(), h.oid()))
        .collect();
    Ok(heads)
}

/// A new bare repository at `path` with everything of `url` fetched into
/// it, in one try (the mirror cache's own first fetch is retried).
pub fn clone_bare(
    path: &Path,
    url: &str,
    credentials: &Credentials,
) -> Result<git2::Repository, TransportError> {
    isolate_from_host_config();
    let repo = git2::Repository::init_bare(path)?;
    fetch(
        &repo,
        url,
        &["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
        credentials,
    )?;
    Ok(repo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_host_never_the_user_info() {
        assert_eq!(
            host_of("https://x-access-token:t0k@github.com/o/r.git"),
            "github.com"
        );
        assert_eq!(
            host_of("ssh://git@127.0.0.1:2222/srv/r.git"),
            "127.0.0.1:2222"
        );
        let creds = Credentials::Token {
            username: "x-access-token".into(),
            token: SecretString::from("t0k-secret".to_owned()),
        };
        assert!(!format!("{creds:?}").contains("t0k-secret"));
    }

    #[test]
    fn pinned_keys_are_read_from_known_hosts_lines() {
        let keys = pinned_keys(&[
            "# a comment".into(),
            "[127.0.0.1]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5".into(),
            "broken line".into(),
        ]);
        assert_eq!(keys.len(), 1);
        assert!(keys[0].starts_with(b"\0\0\0\x0bssh-ed25519"));
    }
}
