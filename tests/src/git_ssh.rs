//! A real OpenSSH server for the tests: `sshd` on 127.0.0.1 with its own
//! host key, key-only login for the keys the test authorizes, serving git
//! over SSH to the repositories on this machine. Needs Debian's
//! `openssh-server` (tests/run.sh installs it) and root, as sshd does.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

pub struct GitSshServer {
    pub port: u16,
    /// The user to log in as (the one running the tests).
    pub user: String,
    /// A `known_hosts` line pinning this server's host key.
    pub known_hosts_line: String,
    child: Child,
    _dir: tempfile::TempDir,
}

/// A key pair made with ssh-keygen (ed25519, no passphrase).
pub struct KeyPair {
    pub private: PathBuf,
    pub public: String,
}

pub fn keygen(dir: &Path, name: &str) -> anyhow::Result<KeyPair> {
    let private = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&private)
        .output()
        .context("running ssh-keygen (apt-get install openssh-client)")?;
    if !out.status.success() {
        bail!(
            "ssh-keygen failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let public = std::fs::read_to_string(private.with_extension("pub"))?
        .trim()
        .to_owned();
    Ok(KeyPair { private, public })
}

const SSHD: &str = "/usr/sbin/sshd";

impl GitSshServer {
    /// Starts sshd accepting exactly `authorized_keys` (public key lines).
    pub fn start(authorized_keys: &[&str]) -> anyhow::Result<GitSshServer> {
        if !Path::new(SSHD).exists() {
            bail!("{SSHD} is missing: apt-get install openssh-server");
        }
        let dir = tempfile::tempdir()?;
        let host = keygen(dir.path(), "host_key")?;
        let authorized = dir.path().join("authorized_keys");
        std::fs::write(&authorized, authorized_keys.join("\n") + "\n")?;
        // sshd's privilege separation directory, normally made by its
        // service unit.
        std::fs::create_dir_all("/run/sshd").context("creating /run/sshd (sshd needs root)")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {authorized}\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile none\nLogLevel ERROR\n",
                host = host.private.display(),
                authorized = authorized.display(),
            ),
        )?;
        let mut child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting sshd")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait()? {
                bail!("sshd exited at start-up: {status}");
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                bail!("sshd did not listen on 127.0.0.1:{port} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut key = host.public.split_whitespace();
        let (kind, blob) = (key.next().unwrap_or(""), key.next().unwrap_or(""));
        let user = String::from_utf8(Command::new("id").arg("-un").output()?.stdout)?
            .trim()
            .to_owned();
        Ok(GitSshServer {
            port,
            user,
            known_hosts_line: format!("[127.0.0.1]:{port} {kind} {blob}"),
            child,
            _dir: dir,
        })
    }

    /// `ssh://user@127.0.0.1:port/<absolute path>`.
    pub fn url(&self, repo: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            repo.display()
        )
    }
}

impl Drop for GitSshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
