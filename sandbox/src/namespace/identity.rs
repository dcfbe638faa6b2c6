//! Who a namespace sandbox is on the host. The guest user (uid 1000
//! inside) maps to a host user of the sandboxes' own, `forgehand-sandbox`
//! by default: never root, never the user that runs Forgehand. So what
//! the kernel checks against host uids (files under `/proc/sys`, the
//! keyring, files a host user owns, a setuid file on the host) sees an
//! unprivileged stranger, whatever a mistake in the mounts lets through.
//!
//! bubblewrap maps the guest user to the uid that starts it, so Forgehand
//! (root) starts bubblewrap as that user. Only root can: Forgehand run by
//! another user has no second identity to give, and the backend then
//! refuses to start, rather than run the agent as Forgehand's own user.
//!
//! The working copy is the sandbox user's while the sandbox lives (so the
//! agent can change it) and is given back to its owner when it is
//! destroyed, before the host's git reads it.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The host user sandboxes run as unless configured otherwise.
pub const DEFAULT_HOST_USER: &str = "forgehand-sandbox";

/// How an operator makes that user.
pub const CREATE_USER: &str = "useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin forgehand-sandbox";

/// A host uid and gid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostIdentity {
    pub uid: u32,
    pub gid: u32,
}

impl HostIdentity {
    /// The identity sandboxes get: `user` is a name from /etc/passwd or
    /// `uid:gid`. Fails, saying what to do, when Forgehand is not root,
    /// when there is no such user, or when it is root or Forgehand's own.
    pub fn resolve(user: &str) -> Result<HostIdentity, String> {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if me != 0 {
            return Err(format!(
                "Forgehand runs as uid {me}, not root: the namespace backend runs each sandbox as a host \
                 user of its own ({user}), and only root can start a process as another user. Run \
                 Forgehand as root (as deploy/quickstart.sh and the systemd unit do); it will not run \
                 the agent as its own user"
            ));
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let identity = Self::parse(user, &passwd)?;
        if identity.uid == 0 || identity.gid == 0 {
            return Err(format!(
                "sandbox.host_user {user:?} is root (uid {} gid {}): sandboxes must never map to uid or gid 0",
                identity.uid, identity.gid
            ));
        }
        if identity.uid == me {
            return Err(format!(
                "sandbox.host_user {user:?} is the user that runs Forgehand: sandboxes need one of their own"
            ));
        }
        Ok(identity)
    }

    /// `uid:gid`, or a user's entry in a passwd file's text.
    fn parse(user: &str, passwd: &str) -> Result<HostIdentity, String> {
        if let Some((uid, gid)) = user.split_once(':') {
            return match (uid.parse(), gid.parse()) {
                (Ok(uid), Ok(gid)) => Ok(HostIdentity { uid, gid }),
                _ => Err(format!(
                    "sandbox.host_user {user:?}: expected a user name or uid:gid"
                )),
            };
        }
        passwd
            .lines()
            .map(|line| line.split(':').collect::<Vec<_>>())
            .find(|fields| fields.len() >= 4 && fields[0] == user)
            .and_then(|fields| {
                Some(HostIdentity {
                    uid: fields[2].parse().ok()?,
                    gid: fields[3].parse().ok()?,
                })
            })
            .ok_or_else(|| {
                if user == DEFAULT_HOST_USER {
                    format!(
                        "there is no user {user} on this host for sandboxes to run as: create it with `{CREATE_USER}` \
                         (deploy/quickstart.sh and tests/run.sh do), or set sandbox.host_user"
                    )
                } else {
                    format!("sandbox.host_user: there is no user {user:?} in /etc/passwd")
                }
            })
    }
}

/// Who owned the working copy before it was handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner {
    uid: u32,
    gid: u32,
}

/// Gives every entry of the tree at `dir` (the directory included, no
/// symlink followed, no other file system entered) to `to`; returns
/// whom it belonged to. Runs before the sandbox exists: nothing changes
/// the tree meanwhile.
pub(crate) fn hand_over(dir: &Path, to: HostIdentity) -> io::Result<Owner> {
    let meta = std::fs::symlink_metadata(dir)?;
    let owner = Owner {
        uid: meta.uid(),
        gid: meta.gid(),
    };
    chown_tree(dir, to.uid, to.gid)?;
    Ok(owner)
}

/// Forgehand's own user: whom a prepared layer goes back to.
pub(crate) fn ours() -> Owner {
    // SAFETY: geteuid and getegid cannot fail.
    unsafe {
        Owner {
            uid: libc::geteuid(),
            gid: libc::getegid(),
        }
    }
}

/// Gives the tree at `dir` to `to` (no symlink followed, no other file
/// system entered), for a caller preparing layers the sandbox user will
/// write through.
pub(crate) fn give(dir: &Path, to: HostIdentity) -> io::Result<()> {
    chown_tree(dir, to.uid, to.gid)
}

/// Gives the tree back to its owner. Runs once every process of the
/// sandbox is dead. `chown` also clears any setuid and setgid bit.
pub(crate) fn take_back(dir: &Path, owner: Owner) -> io::Result<()> {
    chown_tree(dir, owner.uid, owner.gid)
}

fn chown_tree(root: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let device = std::fs::symlink_metadata(root)?.dev();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        lchown(&dir, uid, gid)?;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path)?;
            if meta.is_dir() && meta.dev() == device {
                pending.push(path);
            } else if meta.dev() == device {
                lchown(&path, uid, gid)?;
            }
        }
    }
    Ok(())
}

fn lchown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
        forgehand-sandbox:x:996:993::/nonexistent:/usr/sbin/nologin\n\
        broken:x:notanumber:1::/:/bin/sh\n";

    #[test]
    fn a_user_is_found_by_name_or_given_as_numbers() {
        assert_eq!(
            HostIdentity::parse("forgehand-sandbox", PASSWD),
            Ok(HostIdentity { uid: 996, gid: 993 })
        );
        assert_eq!(
            HostIdentity::parse("2000:3000", PASSWD),
            Ok(HostIdentity {
                uid: 2000,
                gid: 3000
            })
        );
        assert!(HostIdentity::parse("2000:x", PASSWD).is_err());
        assert!(HostIdentity::parse("broken", PASSWD).is_err());
        let missing = HostIdentity::parse(DEFAULT_HOST_USER, "").unwrap_err();
        assert!(missing.contains("useradd --system"), "{missing}");
        let other = HostIdentity::parse("nobody-here", PASSWD).unwrap_err();
        assert!(other.contains("no user \"nobody-here\""), "{other}");
    }
}
