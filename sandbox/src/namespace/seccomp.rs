//! The system-call filter every process of a namespace sandbox runs under:
//! the sandbox's first process (bubblewrap loads it) and every exec (its
//! process installs it last, just before it runs the program). In the
//! spirit of Docker's default profile, it refuses what reaches kernel
//! state shared with the host: the keyring, BPF, performance counters,
//! userfaultfd, modules and kexec, mounts, new namespaces, the clock,
//! swap, reboot, file handles, io_uring, kernel AIO, other roots, VM sockets (which leave the
//! network namespace for the hypervisor), and the setuid and setgid bits.
//!
//! It is a deny list with arguments checked where the call is fine
//! otherwise (`clone` without namespace flags, `chmod` without setuid).
//! Two things make a deny list sound here: calls of another ABI (x32, or
//! i386 through `int 0x80`) never reach it (the arch check kills i386,
//! the second program refuses every x32 number), and calls whose
//! arguments a filter cannot read (`clone3`, `openat2`: a pointer to a
//! struct) answer ENOSYS, so that libc falls back to the calls it can.
//!
use std::io;
use std::sync::LazyLock;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};

/// `open_tree_attr` (Linux 6.15): newer than the libc crate's list. New
/// system calls share their number on every architecture.
const SYS_OPEN_TREE_ATTR: i64 = 467;

/// The bit that marks an x32 system call number on x86_64.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Refused outright, with EPERM: (name, number, why).
pub const DENIED: &[(&str, i64, &str)] = &[
    ("keyctl", libc::SYS_keyctl, "the kernel keyring"),
    ("add_key", libc::SYS_add_key, "the kernel keyring"),
    ("request_key", libc::SYS_request_key, "the kernel keyring"),
    ("bpf", libc::SYS_bpf, "BPF programs and maps"),
    (
        "perf_event_open",
        libc::SYS_perf_event_open,
        "performance counters",
    ),
    ("userfaultfd", libc::SYS_userfaultfd, "userfaultfd"),
    ("init_module", libc::SYS_init_module, "kernel modules"),
    ("finit_module", libc::SYS_finit_module, "kernel modules"),
    ("delete_module", libc::SYS_delete_module, "kernel modules"),
    ("kexec_load", libc::SYS_kexec_load, "kexec"),
    ("kexec_file_load", libc::SYS_kexec_file_load, "kexec"),
    ("mount", libc::SYS_mount, "mounts"),
    ("umount2", libc::SYS_umount2, "mounts"),
    ("pivot_root", libc::SYS_pivot_root, "mounts"),
    ("move_mount", libc::SYS_move_mount, "mounts"),
    ("open_tree", libc::SYS_open_tree, "mounts"),
    ("open_tree_attr", SYS_OPEN_TREE_ATTR, "mounts"),
    ("fsopen", libc::SYS_fsopen, "mounts"),
    ("fsconfig", libc::SYS_fsconfig, "mounts"),
    ("fsmount", libc::SYS_fsmount, "mounts"),
    ("fspick", libc::SYS_fspick, "mounts"),
    ("mount_setattr", libc::SYS_mount_setattr, "mounts"),
    ("unshare", libc::SYS_unshare, "new namespaces"),
    ("setns", libc::SYS_setns, "other namespaces"),
    ("chroot", libc::SYS_chroot, "another root"),
    ("acct", libc::SYS_acct, "process accounting"),
    ("swapon", libc::SYS_swapon, "swap"),
    ("swapoff", libc::SYS_swapoff, "swap"),
    ("reboot", libc::SYS_reboot, "reboot"),
    ("settimeofday", libc::SYS_settimeofday, "the clock"),
    ("clock_settime", libc::SYS_clock_settime, "the clock"),
    ("clock_adjtime", libc::SYS_clock_adjtime, "the clock"),
    ("adjtimex", libc::SYS_adjtimex, "the clock"),
    ("syslog", libc::SYS_syslog, "the kernel log"),
    ("quotactl", libc::SYS_quotactl, "disk quotas"),
    ("quotactl_fd", libc::SYS_quotactl_fd, "disk quotas"),
    ("vhangup", libc::SYS_vhangup, "terminals"),
    (
        "open_by_handle_at",
        libc::SYS_open_by_handle_at,
        "file handles (opens files by inode, past every mount)",
    ),
    (
        "name_to_handle_at",
        libc::SYS_name_to_handle_at,
        "file handles",
    ),
    ("io_uring_setup", libc::SYS_io_uring_setup, "io_uring"),
    ("io_uring_enter", libc::SYS_io_uring_enter, "io_uring"),
    ("io_uring_register", libc::SYS_io_uring_register, "io_uring"),
    ("fanotify_init", libc::SYS_fanotify_init, "fanotify"),
    (
        "io_setup",
        libc::SYS_io_setup,
        "kernel AIO (one pool for the whole host, fs.aio-max-nr)",
    ),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl, "I/O ports"),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm, "I/O ports"),
    #[cfg(target_arch = "x86_64")]
    ("lookup_dcookie", libc::SYS_lookup_dcookie, "profiling"),
    #[cfg(target_arch = "x86_64")]
    ("uselib", libc::SYS_uselib, "obsolete"),
    #[cfg(target_arch = "x86_64")]
    ("ustat", libc::SYS_ustat, "obsolete"),
    #[cfg(target_arch = "x86_64")]
    ("sysfs", libc::SYS_sysfs, "obsolete"),
    #[cfg(target_arch = "x86_64")]
    ("_sysctl", libc::SYS__sysctl, "obsolete"),
    #[cfg(target_arch = "x86_64")]
    ("nfsservctl", libc::SYS_nfsservctl, "obsolete"),
];

/// Refused with EPERM when an argument says so: (name, what is refused).
pub const DENIED_WITH: &[(&str, &str)] = &[
    ("clone", "any CLONE_NEW* namespace flag"),
    (
        "chmod, fchmod, fchmodat, fchmodat2",
        "the setuid or setgid bit",
    ),
    (
        "open, openat, creat (with O_CREAT or O_TMPFILE)",
        "the setuid or setgid bit",
    ),
    ("mknod, mknodat", "the setuid or setgid bit"),
    ("socket", "AF_VSOCK (VM sockets reach the hypervisor)"),
    (
        "personality",
        "anything but Linux's default and the values Docker allows",
    ),
];

/// Answered with ENOSYS, so that libc uses the calls above instead.
pub const UNSUPPORTED: &[&str] = &["clone3", "openat2", "every x32 system call"];

const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

const PRIVILEGE_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];

/// The compiled programs, in the order they are installed.
pub(crate) fn programs() -> &'static [Vec<libc::sock_filter>] {
    static PROGRAMS: LazyLock<Vec<Vec<libc::sock_filter>>> = LazyLock::new(|| {
        vec![
            unsupported_program(),
            denied_program().expect("the deny list compiles"),
        ]
    });
    &PROGRAMS
}

fn arch() -> seccompiler::TargetArch {
    std::env::consts::ARCH
        .try_into()
        .expect("seccompiler knows this architecture")
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).expect("a valid condition")
}

/// One rule per bit: the call matches when `arg` has any of `bits` set
/// (and every condition in `also`).
fn any_bit(arg: u8, bits: &[u64], also: &[SeccompCondition]) -> Vec<SeccompRule> {
    bits.iter()
        .map(|&bit| {
            let mut conditions = also.to_vec();
            conditions.push(cond(arg, SeccompCmpOp::MaskedEq(bit), bit));
            SeccompRule::new(conditions).expect("a valid rule")
        })
        .collect()
}

/// The mode argument of a call that creates a file holds setuid/setgid,
/// when its flags argument creates one.
fn creating_with_privilege(flags_arg: u8, mode_arg: u8) -> Vec<SeccompRule> {
    let mut rules = Vec::new();
    for create in [libc::O_CREAT as u64, libc::O_TMPFILE as u64] {
        let creates = cond(flags_arg, SeccompCmpOp::MaskedEq(create), create);
        rules.extend(any_bit(mode_arg, &PRIVILEGE_BITS, &[creates]));
    }
    rules
}

fn denied_program() -> Result<Vec<libc::sock_filter>, seccompiler::BackendError> {
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&(_, nr, _)| (nr, Vec::new())).collect();
    rules.insert(libc::SYS_clone, any_bit(0, &NAMESPACE_FLAGS, &[]));
    rules.insert(libc::SYS_fchmod, any_bit(1, &PRIVILEGE_BITS, &[]));
    rules.insert(libc::SYS_fchmodat, any_bit(2, &PRIVILEGE_BITS, &[]));
    rules.insert(libc::SYS_fchmodat2, any_bit(2, &PRIVILEGE_BITS, &[]));
    rules.insert(libc::SYS_openat, creating_with_privilege(2, 3));
    rules.insert(libc::SYS_mknodat, any_bit(2, &PRIVILEGE_BITS, &[]));
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_chmod, any_bit(1, &PRIVILEGE_BITS, &[]));
        rules.insert(libc::SYS_open, creating_with_privilege(1, 2));
        rules.insert(libc::SYS_creat, any_bit(1, &PRIVILEGE_BITS, &[]));
        rules.insert(libc::SYS_mknod, any_bit(1, &PRIVILEGE_BITS, &[]));
    }
    rules.insert(
        libc::SYS_socket,
        vec![
            SeccompRule::new(vec![cond(0, SeccompCmpOp::Eq, libc::AF_VSOCK as u64)])
                .expect("a valid rule"),
        ],
    );
    // Docker's allowed personalities: Linux's default, PER_LINUX32,
    // UNAME26, both together, and the query (0xffffffff).
    rules.insert(
        libc::SYS_personality,
        vec![SeccompRule::new(
            [0u64, 0x8, 0x20000, 0x20008, 0xffff_ffff]
                .iter()
                .map(|&allowed| cond(0, SeccompCmpOp::Ne, allowed))
                .collect(),
        )
        .expect("a valid rule")],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch(),
    )?;
    let program: seccompiler::BpfProgram = filter.try_into()?;
    Ok(program.into_iter().map(to_libc).collect())
}

fn to_libc(f: seccompiler::sock_filter) -> libc::sock_filter {
    libc::sock_filter {
        code: f.code,
        jt: f.jt,
        jf: f.jf,
        k: f.k,
    }
}

/// ENOSYS for `clone3`, `openat2` and (on x86_64) every x32 number; a
/// foreign architecture is killed by the other program.
fn unsupported_program() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    #[cfg(target_arch = "x86_64")]
    const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let stmt = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code, k, jt, jf| libc::sock_filter { code, jt, jf, k };
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let allow = libc::SECCOMP_RET_ALLOW;
    // struct seccomp_data: nr at 0, arch at 4.
    let mut program = vec![
        stmt(LD_W_ABS, 4),
        // Not ours: left to the other program, which kills it.
        jump(JEQ_K, audit_arch(), 1, 0),
        stmt(RET_K, allow),
        stmt(LD_W_ABS, 0),
    ];
    #[cfg(target_arch = "x86_64")]
    program.push(jump(JGE_K, X32_SYSCALL_BIT, 3, 0));
    program.extend([
        jump(JEQ_K, libc::SYS_clone3 as u32, 2, 0),
        jump(JEQ_K, libc::SYS_openat2 as u32, 1, 0),
        stmt(RET_K, allow),
        stmt(RET_K, enosys),
    ]);
    // Without the x32 jump (other architectures) the offsets above still
    // land on the last two statements.
    program
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the namespace sandbox's system-call filter knows x86_64 and aarch64 only");

fn audit_arch() -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        0xC000_003E
    }
    #[cfg(target_arch = "aarch64")]
    {
        0xC000_00B7
    }
}

/// Installs every program on the calling thread. Async-signal-safe: for
/// the time between fork and exec. `no_new_privs` must be set already.
pub(crate) fn install(programs: &[Vec<libc::sock_filter>]) -> io::Result<()> {
    for program in programs {
        let fprog = libc::sock_fprog {
            len: program.len() as u16,
            filter: program.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: the program lives for the call; the kernel copies it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &fprog as *const libc::sock_fprog,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The programs as bubblewrap's `--add-seccomp-fd` reads them: the raw
/// instructions, each in a memfd positioned at its start.
pub(crate) fn memfds() -> io::Result<Vec<std::fs::File>> {
    use std::io::{Seek, Write};
    programs()
        .iter()
        .map(|program| {
            // SAFETY: a fresh descriptor that the File then owns.
            let fd =
                unsafe { libc::memfd_create(c"forgehand-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: fd is ours alone.
            let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
            let mut bytes = Vec::with_capacity(program.len() * 8);
            for f in program {
                bytes.extend_from_slice(&f.code.to_ne_bytes());
                bytes.push(f.jt);
                bytes.push(f.jf);
                bytes.extend_from_slice(&f.k.to_ne_bytes());
            }
            file.write_all(&bytes)?;
            file.rewind()?;
            Ok(file)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the filter's first program (the hand-written one) on a
    /// system call, as the kernel would: a tiny classic-BPF interpreter
    /// for the instructions it uses.
    fn run(program: &[libc::sock_filter], nr: u32, arch: u32) -> u32 {
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let f = program[pc];
            match f.code {
                c if c == (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16 => {
                    acc = if f.k == 0 { nr } else { arch };
                    pc += 1;
                }
                c if c == (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16 => {
                    pc += 1 + usize::from(if acc == f.k { f.jt } else { f.jf });
                }
                c if c == (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16 => {
                    pc += 1 + usize::from(if acc >= f.k { f.jt } else { f.jf });
                }
                c if c == (libc::BPF_RET | libc::BPF_K) as u16 => return f.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    #[test]
    fn struct_argument_calls_and_x32_answer_enosys() {
        let program = unsupported_program();
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        let arch = audit_arch();
        assert_eq!(run(&program, libc::SYS_clone3 as u32, arch), enosys);
        assert_eq!(run(&program, libc::SYS_openat2 as u32, arch), enosys);
        assert_eq!(
            run(&program, libc::SYS_read as u32, arch),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(
            run(&program, libc::SYS_clone as u32, arch),
            libc::SECCOMP_RET_ALLOW
        );
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            run(&program, X32_SYSCALL_BIT | libc::SYS_keyctl as u32, arch),
            enosys
        );
        // Another architecture is the other program's to kill.
        assert_eq!(run(&program, 0, 0x4000_0003), libc::SECCOMP_RET_ALLOW);
    }

    #[test]
    fn the_deny_list_compiles() {
        assert!(programs()[1].len() > DENIED.len());
        let memfds = memfds().unwrap();
        assert_eq!(memfds.len(), 2);
        assert_eq!(
            memfds[0].metadata().unwrap().len() as usize,
            programs()[0].len() * 8
        );
    }

    #[test]
    fn the_documented_list_is_this_list() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/security.md"),
        )
        .unwrap();
        let start = doc
            .find("<!-- seccomp: start -->")
            .expect("the start marker");
        let end = doc.find("<!-- seccomp: end -->").expect("the end marker");
        let block = &doc[start..end];
        let documented: std::collections::BTreeSet<&str> = block
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|name| {
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            })
            .collect();
        let denied: std::collections::BTreeSet<&str> = DENIED.iter().map(|(n, _, _)| *n).collect();
        let with_arguments = [
            "clone",
            "chmod",
            "fchmod",
            "fchmodat",
            "fchmodat2",
            "mknod",
            "mknodat",
            "open",
            "openat",
            "creat",
            "socket",
            "personality",
        ];
        for name in &denied {
            assert!(
                documented.contains(name),
                "{name} is refused but not documented"
            );
        }
        for name in &documented {
            assert!(
                denied.contains(name) || with_arguments.contains(name),
                "{name} is documented but not in the filter"
            );
        }
    }
}
