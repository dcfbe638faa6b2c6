//! How an exec gets into a live sandbox: what `nsenter` would do, done
//! between fork and exec, so that the last steps are the sandbox's own
//! confinement (Landlock, then the seccomp filter) and nothing of the
//! host's runs after them. (`nsenter` itself cannot run under Landlock:
//! a Landlock domain may not even look at a process outside it, and
//! joining the sandbox's namespaces means opening its first process's.)
//!
//! In the forked child: leave root's groups, set `no_new_privs`, join the
//! exec's cgroups, join the sandbox's namespaces (the user namespace
//! last, as root), then fork once more, because only children enter a
//! pid namespace. The middle process closes every descriptor and waits,
//! then ends as the command ended (its status, or its signal). The
//! command's process changes into the sandbox's root and working
//! directory, becomes the guest user (the sandbox's host user outside),
//! and is confined; then `exec` runs the program.
//!
//! Everything here runs after fork in a multithreaded process: only
//! async-signal-safe system calls on memory prepared before the fork.
//! The second fork is a raw `clone`, so that no `atfork` handler runs.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;

use crate::{GUEST_GID, GUEST_UID};

/// Namespaces entered, in this order: the user namespace last, because
/// entering it first would leave root without the rights to enter the
/// others.
const KINDS: [(&str, libc::c_int); 7] = [
    ("cgroup", libc::CLONE_NEWCGROUP),
    ("ipc", libc::CLONE_NEWIPC),
    ("uts", libc::CLONE_NEWUTS),
    ("net", libc::CLONE_NEWNET),
    ("pid", libc::CLONE_NEWPID),
    ("mnt", libc::CLONE_NEWNS),
    ("user", libc::CLONE_NEWUSER),
];

/// What confines each command, besides the namespaces and the filter.
#[derive(Clone, Copy)]
pub(crate) struct Confinement {
    /// The Landlock ruleset; `None` on a kernel without Landlock.
    pub landlock: Option<RawFd>,
    /// `RLIMIT_NOFILE`, soft and hard (see the open_files module).
    pub open_files: libc::rlimit,
}

/// What the forked child needs, opened and built before the fork.
pub(crate) struct Entry {
    namespaces: Vec<(File, libc::c_int)>,
    root: File,
    workdir: CString,
    /// Where the program may be: each `PATH` directory joined with it, or
    /// the program itself when it names a path.
    candidates: Vec<CString>,
    not_found: Vec<u8>,
    no_workdir: Vec<u8>,
    cgroup_join_files: Vec<CString>,
    confinement: Confinement,
    filters: &'static [Vec<libc::sock_filter>],
}

impl Entry {
    /// Opens the namespaces of the sandbox whose first process is `pid`
    /// (the cgroup namespace only when it is not ours already).
    pub(crate) fn open(
        pid: i32,
        enter_cgroup_ns: bool,
        workdir: &str,
        program: &str,
        path_var: &str,
        cgroup_join_files: Vec<CString>,
        confinement: Confinement,
    ) -> io::Result<Entry> {
        let open = |path: String, flags| {
            File::options()
                .read(true)
                .custom_flags(libc::O_CLOEXEC | flags)
                .open(path)
        };
        let mut namespaces = Vec::with_capacity(KINDS.len());
        for (name, kind) in KINDS {
            if name == "cgroup" && !enter_cgroup_ns {
                continue;
            }
            namespaces.push((open(format!("/proc/{pid}/ns/{name}"), 0)?, kind));
        }
        let root = open(format!("/proc/{pid}/root"), libc::O_DIRECTORY)?;
        let cstring = |s: &str| CString::new(s).map_err(|e| io::Error::other(e.to_string()));
        let candidates = if program.contains('/') {
            vec![cstring(program)?]
        } else {
            path_var
                .split(':')
                .filter(|dir| dir.starts_with('/'))
                .map(|dir| cstring(&format!("{}/{program}", dir.trim_end_matches('/'))))
                .collect::<io::Result<_>>()?
        };
        Ok(Entry {
            namespaces,
            root,
            workdir: cstring(workdir)?,
            candidates,
            not_found: format!("forgehand: {program}: command not found\n").into_bytes(),
            no_workdir: format!("forgehand: cannot change directory to {workdir}\n").into_bytes(),
            cgroup_join_files,
            confinement,
            filters: super::seccomp::programs(),
        })
    }

    /// Runs in the child between fork and exec (see the module's text).
    /// Returns in the process that is to exec the program; the middle
    /// process never returns.
    ///
    /// # Safety
    /// Only between fork and exec, in the child.
    pub(crate) unsafe fn enter(&self) -> io::Result<()> {
        let check = |rc: libc::c_int| {
            if rc < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // None of root's groups goes along.
        check(libc::setgroups(0, std::ptr::null()))?;
        // No setuid program can raise privileges again, and no
        // controlling terminal to inject input into.
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        libc::setsid();
        // Lowered while still root on the host: the guest user cannot
        // raise it again.
        check(libc::setrlimit(
            libc::RLIMIT_NOFILE,
            &self.confinement.open_files,
        ))?;
        super::holder::join_cgroups(&self.cgroup_join_files)?;
        for (ns, kind) in &self.namespaces {
            check(libc::setns(ns.as_raw_fd(), *kind))?;
        }
        // Only a child enters the pid namespace.
        let pid = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0);
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid > 0 {
            wait_and_mirror(pid as libc::pid_t);
        }
        check(libc::fchdir(self.root.as_raw_fd()))?;
        check(libc::chroot(c".".as_ptr()))?;
        if libc::chdir(self.workdir.as_ptr()) != 0 {
            fail(&self.no_workdir, 1);
        }
        check(libc::setresgid(GUEST_GID, GUEST_GID, GUEST_GID))?;
        check(libc::setresuid(GUEST_UID, GUEST_UID, GUEST_UID))?;
        if !self
            .candidates
            .iter()
            .any(|c| libc::access(c.as_ptr(), libc::X_OK) == 0)
        {
            fail(&self.not_found, 127);
        }
        // The confinement comes last, and holds the program and all it
        // starts.
        if let Some(fd) = self.confinement.landlock {
            super::landlock::restrict_self_raw(fd)?;
        }
        super::seccomp::install(self.filters)
    }
}

/// Says why on stderr and ends the process with `code`, as a shell would.
unsafe fn fail(message: &[u8], code: libc::c_int) -> ! {
    libc::write(2, message.as_ptr().cast(), message.len());
    libc::_exit(code)
}

/// The middle process: holds nothing open, waits for the command, and
/// ends the same way.
unsafe fn wait_and_mirror(child: libc::pid_t) -> ! {
    libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    let mut status = 0;
    loop {
        let rc = libc::waitpid(child, &mut status, 0);
        if rc == child {
            break;
        }
        if rc < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(125);
        }
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal);
    }
    libc::_exit(libc::WEXITSTATUS(status))
}

/// The cgroup files as C strings, for the child.
pub(crate) fn c_paths(paths: &[std::path::PathBuf]) -> Vec<CString> {
    paths
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()).expect("cgroup paths hold no NUL"))
        .collect()
}
