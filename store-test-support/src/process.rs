//! The processes of a test server: finding Debian's binaries, running them
//! as an unprivileged user, a server that dies with the test process, and
//! leftovers of test processes that were killed.

use std::ffi::CString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::{io, HarnessError};

/// The temporary directories of test servers start so.
pub(crate) const DIR_PREFIX: &str = "forgehand-pg-";
/// In a server's directory: the pid of the test process that made it.
const OWNER_FILE: &str = "harness.pid";

/// The newest `/usr/lib/postgresql/<version>/bin` with a server in it, or
/// `$FORGEHAND_TEST_PG_BIN`.
pub(crate) fn binaries() -> Result<PathBuf, HarnessError> {
    binaries_in(
        std::env::var_os("FORGEHAND_TEST_PG_BIN").map(PathBuf::from),
        Path::new("/usr/lib/postgresql"),
    )
}

pub(crate) fn binaries_in(chosen: Option<PathBuf>, debian: &Path) -> Result<PathBuf, HarnessError> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = chosen {
        return if has_server(&dir) {
            Ok(dir)
        } else {
            Err(HarnessError::NotInstalled)
        };
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(debian)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            has_server(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .ok_or(HarnessError::NotInstalled)
}

/// Who the server runs as when the tests run as root.
pub(crate) struct User {
    name: String,
    uid: u32,
    gid: u32,
}

impl User {
    /// `None` when the tests do not run as root: the server runs as they do.
    pub(crate) fn to_run_as() -> Result<Option<User>, HarnessError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(None);
        }
        let name = std::env::var("FORGEHAND_TEST_PG_USER").unwrap_or_else(|_| "nobody".into());
        let (uid, gid) = lookup(&name).ok_or_else(|| HarnessError::NoUser(name.clone()))?;
        if uid == 0 {
            return Err(HarnessError::NoUser(format!("{name} (it is root)")));
        }
        Ok(Some(User { name, uid, gid }))
    }

    pub(crate) fn own(&self, path: &Path) -> Result<(), HarnessError> {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).map_err(io(format!(
            "giving {} to {}",
            path.display(),
            self.name
        )))
    }
}

pub(crate) fn who(user: Option<&User>) -> String {
    user.map_or_else(|| "this user".into(), |u| u.name.clone())
}

fn lookup(name: &str) -> Option<(u32, u32)> {
    let name = CString::new(name).ok()?;
    // SAFETY: passwd is plain data; getpwnam_r writes it and the strings
    // it points to into `buf`, which outlives the read of uid and gid.
    unsafe {
        let mut passwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut found = std::ptr::null_mut();
        let rc = libc::getpwnam_r(
            name.as_ptr(),
            &mut passwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        );
        (rc == 0 && !found.is_null()).then_some((passwd.pw_uid, passwd.pw_gid))
    }
}

/// Runs `command` in `dir` as `user`; a server also gets SIGINT (fast
/// shutdown) when the test process dies, however it dies.
pub(crate) fn prepare(command: &mut Command, dir: &Path, user: Option<&User>, server: bool) {
    command.current_dir(dir).env("LC_ALL", "C");
    let ids = user.map(|u| (u.uid, u.gid));
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if let Some((uid, gid)) = ids {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // After setuid, which clears it.
            if server && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Spawns from a thread that lives as long as the process: the parent
/// death signal follows the thread that forked, and a test's thread ends
/// before the shared server should.
pub(crate) fn spawn_lasting(command: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("forgehand-pg-spawner".into())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("the spawner thread starts");
        Mutex::new(requests)
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((command, reply))
        .map_err(std::io::Error::other)?;
    answer.recv().map_err(std::io::Error::other)?
}

/// Fast shutdown, then waits; a server that does not stop in time is killed.
pub(crate) fn stop(child: &mut Child) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill has no memory preconditions; the child is not reaped yet.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub(crate) fn mark_owner(dir: &Path) -> Result<(), HarnessError> {
    std::fs::write(dir.join(OWNER_FILE), std::process::id().to_string())
        .map_err(io("marking the server's directory"))
}

pub(crate) fn write_private(
    path: &Path,
    contents: &[u8],
    user: Option<&User>,
) -> Result<(), HarnessError> {
    std::fs::write(path, contents).map_err(io(format!("writing {}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("restricting {}", path.display())))?;
    match user {
        Some(user) => user.own(path),
        None => Ok(()),
    }
}

pub(crate) fn free_port() -> Result<u16, HarnessError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("finding a free port"))?;
    Ok(listener
        .local_addr()
        .map_err(io("finding a free port"))?
        .port())
}

/// Removes the directories (and stops the servers, which their parent
/// death signal should have stopped) of test processes that are gone:
/// killed before they could clean up.
pub(crate) fn sweep_stale() {
    let alive = |pid: &str, comm: Option<&str>| {
        let proc = Path::new("/proc").join(pid.trim());
        match comm {
            None => proc.exists(),
            Some(comm) => {
                std::fs::read_to_string(proc.join("comm")).is_ok_and(|c| c.trim() == comm)
            }
        }
    };
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let is_ours = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(DIR_PREFIX));
        let Ok(owner) = std::fs::read_to_string(dir.join(OWNER_FILE)) else {
            continue;
        };
        if !is_ours || owner.trim().is_empty() || alive(&owner, None) {
            continue;
        }
        let pid_file = std::fs::read_to_string(dir.join("data/postmaster.pid")).unwrap_or_default();
        if let Some(pid) = pid_file.lines().next() {
            if alive(pid, Some("postgres")) {
                if let Ok(pid) = pid.trim().parse::<libc::pid_t>() {
                    // SAFETY: as in `stop`; the process is a postgres of a
                    // test process that no longer exists.
                    unsafe { libc::kill(pid, libc::SIGQUIT) };
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Runs `stop` when the process exits normally (the test harness's end):
/// statics are never dropped.
pub(crate) fn at_exit(stop: fn()) {
    static AT_EXIT: OnceLock<fn()> = OnceLock::new();
    extern "C" fn run_at_exit() {
        if let Some(stop) = AT_EXIT.get() {
            stop();
        }
    }
    if AT_EXIT.set(stop).is_ok() {
        // SAFETY: registers a function with no arguments that only stops
        // the server through safe code.
        unsafe { libc::atexit(run_at_exit) };
    }
}
