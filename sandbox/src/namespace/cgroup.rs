//! Limits through cgroups, v1 (one hierarchy per controller, as on this
//! project's machines) and v2 (one unified hierarchy, as on current
//! distributions). Each sandbox gets a group under our own, holding its
//! memory, process and CPU limits; each exec gets a child group of it, so
//! that its whole process tree can be found and killed.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{Limits, SandboxError};

/// The directory, under this process's own cgroup, that holds sandboxes.
const BASE: &str = "forgehand-sandboxes";
const CPU_PERIOD_US: u64 = 100_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hierarchy {
    /// Base directories in the memory, pids and cpu hierarchies.
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: PathBuf,
    },
    V2 {
        base: PathBuf,
    },
}

impl Hierarchy {
    /// Finds the cgroup hierarchies this process is in.
    pub(crate) fn detect() -> Result<Hierarchy, String> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
        let own = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
        Hierarchy::from_tables(&mountinfo, &own)
    }

    pub(crate) fn from_tables(mountinfo: &str, own_cgroups: &str) -> Result<Hierarchy, String> {
        let mounts = parse_mounts(mountinfo);
        let own = |controller: &str| -> Option<String> {
            own_cgroups.lines().find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let matches = if controller.is_empty() {
                    controllers.is_empty()
                } else {
                    controllers.split(',').any(|c| c == controller)
                };
                matches.then(|| path.to_owned())
            })
        };
        // A unified hierarchy that has the controllers wins; a v2 mount
        // beside v1 ones ("hybrid") usually has none.
        if let Some(unified) = mounts.iter().find(|m| m.fstype == "cgroup2") {
            let controllers =
                fs::read_to_string(unified.point.join("cgroup.controllers")).unwrap_or_default();
            let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
            if has("memory") && has("pids") && has("cpu") {
                let path = own("").ok_or("no cgroup v2 entry in /proc/self/cgroup")?;
                return Ok(Hierarchy::V2 {
                    base: join(&unified.point, &path).join(BASE),
                });
            }
        }
        let v1 = |controller: &str| -> Result<PathBuf, String> {
            let mount = mounts
                .iter()
                .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == controller))
                .ok_or_else(|| {
                    format!("no cgroup v1 hierarchy with the {controller} controller is mounted")
                })?;
            let path = own(controller)
                .ok_or_else(|| format!("this process is in no {controller} cgroup"))?;
            Ok(join(&mount.point, &path).join(BASE))
        };
        match (v1("memory"), v1("pids"), v1("cpu")) {
            (Ok(memory), Ok(pids), Ok(cpu)) => Ok(Hierarchy::V1 { memory, pids, cpu }),
            (a, b, c) => Err(format!(
                "neither cgroup v2 with the memory, pids and cpu controllers nor cgroup v1 with them is available ({})",
                [a.err(), b.err(), c.err()].into_iter().flatten().collect::<Vec<_>>().join("; ")
            )),
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Hierarchy::V1 { memory, .. } => format!("cgroup v1 (under {})", memory.display()),
            Hierarchy::V2 { base } => format!("cgroup v2 (under {})", base.display()),
        }
    }

    fn bases(&self) -> Vec<&Path> {
        match self {
            Hierarchy::V1 { memory, pids, cpu } => vec![memory, pids, cpu],
            Hierarchy::V2 { base } => vec![base],
        }
    }

    /// The hierarchy in which each exec gets its own group.
    fn tracker(&self) -> &Path {
        match self {
            Hierarchy::V1 { pids, .. } => pids,
            Hierarchy::V2 { base } => base,
        }
    }

    /// Makes the base directories, and on v2 hands the controllers down
    /// to them.
    pub(crate) fn prepare(&self) -> Result<(), SandboxError> {
        for base in self.bases() {
            fs::create_dir_all(base).map_err(cgroup_error(base))?;
        }
        if let Hierarchy::V2 { base } = self {
            enable_v2_controllers(base)?;
        }
        Ok(())
    }

    /// Creates a sandbox's group with its limits.
    pub(crate) fn create(
        &self,
        name: &str,
        limits: &Limits,
    ) -> Result<SandboxCgroup, SandboxError> {
        self.prepare()?;
        let group = SandboxCgroup {
            dirs: self.bases().iter().map(|b| b.join(name)).collect(),
            tracker: self.tracker().join(name),
        };
        for dir in &group.dirs {
            fs::create_dir(dir).map_err(cgroup_error(dir))?;
        }
        let written = match self {
            Hierarchy::V1 { memory, pids, cpu } => write_v1_limits(
                &memory.join(name),
                &pids.join(name),
                &cpu.join(name),
                limits,
            ),
            Hierarchy::V2 { base } => write_v2_limits(&base.join(name), limits),
        };
        if let Err(error) = written {
            group.remove();
            return Err(error);
        }
        Ok(group)
    }

    /// Sandbox groups whose owner process is gone.
    pub(crate) fn leftovers(&self) -> Vec<SandboxCgroup> {
        let Ok(entries) = fs::read_dir(self.tracker()) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| crate::owner::owner_is_gone(name))
            .map(|name| SandboxCgroup {
                dirs: self.bases().iter().map(|b| b.join(&name)).collect(),
                tracker: self.tracker().join(&name),
            })
            .collect()
    }
}

/// One sandbox's groups (one per hierarchy).
#[derive(Debug)]
pub(crate) struct SandboxCgroup {
    dirs: Vec<PathBuf>,
    tracker: PathBuf,
}

impl SandboxCgroup {
    /// The `cgroup.procs` files a process writes itself into to join.
    pub(crate) fn join_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// A child group for one exec; joining it keeps the sandbox's limits.
    pub(crate) fn exec_group(&self, name: &str) -> Result<ExecCgroup, SandboxError> {
        let dir = self.tracker.join(name);
        fs::create_dir(&dir).map_err(cgroup_error(&dir))?;
        let mut join_files: Vec<PathBuf> = self
            .dirs
            .iter()
            .filter(|d| **d != self.tracker)
            .map(|d| d.join("cgroup.procs"))
            .collect();
        join_files.push(dir.join("cgroup.procs"));
        Ok(ExecCgroup { dir, join_files })
    }

    pub(crate) fn kill_all(&self) {
        kill_tree(&self.tracker);
    }

    /// How often a fork was refused for the process limit so far.
    pub(crate) fn limit_hits(&self) -> u64 {
        self.dirs.iter().map(|d| limit_hits(d)).max().unwrap_or(0)
    }

    /// Removes the groups; anything still inside is killed first.
    pub(crate) fn remove(&self) {
        self.kill_all();
        for dir in &self.dirs {
            remove_tree(dir);
        }
    }

    pub(crate) fn name(&self) -> String {
        self.tracker
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

#[derive(Debug)]
pub(crate) struct ExecCgroup {
    dir: PathBuf,
    pub(crate) join_files: Vec<PathBuf>,
}

impl ExecCgroup {
    pub(crate) fn kill_all(&self) {
        kill_tree(&self.dir);
    }

    /// Removes the group if nothing lives in it any more; a background
    /// process started by the exec keeps it (the sandbox's removal takes
    /// it later).
    pub(crate) fn remove_if_empty(&self) {
        let _ = fs::remove_dir(&self.dir);
    }

    pub(crate) fn is_empty(&self) -> bool {
        pids_in_tree(&self.dir).is_empty()
    }

    /// Forks refused in this exec's group. (Kernels differ in whether the
    /// group that hit the limit or the one that forked counts it: the
    /// caller looks at both.)
    pub(crate) fn limit_hits(&self) -> u64 {
        limit_hits(&self.dir)
    }

    /// Waits until the killed processes no longer count against the
    /// sandbox's process limit. They leave `cgroup.procs` when they die,
    /// but stay charged until the sandbox's first process has reaped
    /// them; an exec right after a fork bomb's would find no process
    /// left to start otherwise.
    pub(crate) fn wait_until_released(&self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let charged = self.dir.join("pids.current");
        let events = self.dir.join("cgroup.events");
        loop {
            let released = match fs::read_to_string(&charged) {
                Ok(n) => n.trim() == "0",
                // v2 without a pids controller of its own: the group is
                // empty once it is no longer populated.
                Err(_) => fs::read_to_string(&events)
                    .map(|e| e.lines().any(|l| l == "populated 0"))
                    .unwrap_or_else(|_| self.is_empty()),
            };
            if released || std::time::Instant::now() >= deadline {
                return released;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn write_v1_limits(
    memory: &Path,
    pids: &Path,
    cpu: &Path,
    limits: &Limits,
) -> Result<(), SandboxError> {
    let bytes = limits.memory_mib.saturating_mul(1 << 20);
    write(&memory.join("memory.limit_in_bytes"), &bytes.to_string())?;
    // With swap accounting, swap counts too; without it the file is absent.
    let memsw = memory.join("memory.memsw.limit_in_bytes");
    if memsw.exists() {
        write(&memsw, &bytes.to_string())?;
    }
    // v1 charges socket buffers apart from the memory above, and without
    // a limit: a sandbox could pin any amount of the host's kernel memory
    // in loopback TCP queues. (v2 charges them to memory.max.)
    let tcp = memory.join("memory.kmem.tcp.limit_in_bytes");
    if tcp.exists() {
        write(&tcp, &tcp_limit_bytes(limits).to_string())?;
    }
    write(&pids.join("pids.max"), &limits.max_pids.to_string())?;
    write(&cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
    write(
        &cpu.join("cpu.cfs_quota_us"),
        &(CPU_PERIOD_US * u64::from(limits.vcpus.max(1))).to_string(),
    )
}

/// Socket buffers a sandbox may hold on cgroup v1: a quarter of its
/// memory, at least 16 MiB.
pub(crate) fn tcp_limit_bytes(limits: &Limits) -> u64 {
    (limits.memory_mib / 4).max(16) * 1024 * 1024
}

fn write_v2_limits(dir: &Path, limits: &Limits) -> Result<(), SandboxError> {
    write(
        &dir.join("memory.max"),
        &limits.memory_mib.saturating_mul(1 << 20).to_string(),
    )?;
    let swap = dir.join("memory.swap.max");
    if swap.exists() {
        write(&swap, "0")?;
    }
    write(&dir.join("pids.max"), &limits.max_pids.to_string())?;
    write(
        &dir.join("cpu.max"),
        &format!(
            "{} {CPU_PERIOD_US}",
            CPU_PERIOD_US * u64::from(limits.vcpus.max(1))
        ),
    )
}

/// cgroup v2 gives a group controllers only through its parent's
/// `cgroup.subtree_control`, and a group with processes in it cannot hand
/// controllers down. When our own group holds processes (us), we move
/// ourselves into a leaf beside the sandboxes first, as container
/// runtimes do. (Under systemd this needs `Delegate=yes`.)
fn enable_v2_controllers(base: &Path) -> Result<(), SandboxError> {
    const CONTROLLERS: &str = "+memory +pids +cpu";
    let own = base.parent().expect("the base is under our own group");
    let own_control = own.join("cgroup.subtree_control");
    if let Err(error) = fs::write(&own_control, CONTROLLERS) {
        if error.raw_os_error() != Some(libc::EBUSY) {
            return Err(cgroup_error(&own_control)(error));
        }
        let leaf = own.join("forgehand-service");
        fs::create_dir_all(&leaf).map_err(cgroup_error(&leaf))?;
        write(&leaf.join("cgroup.procs"), "0")?;
        fs::write(&own_control, CONTROLLERS).map_err(cgroup_error(&own_control))?;
    }
    write(&base.join("cgroup.subtree_control"), CONTROLLERS)
}

fn write(path: &Path, value: &str) -> Result<(), SandboxError> {
    fs::write(path, value).map_err(cgroup_error(path))
}

fn cgroup_error(path: &Path) -> impl FnOnce(io::Error) -> SandboxError {
    let path = path.to_owned();
    move |source| SandboxError::Cgroup { path, source }
}

fn limit_hits(dir: &Path) -> u64 {
    fs::read_to_string(dir.join("pids.events"))
        .ok()
        .and_then(|events| {
            events
                .lines()
                .find_map(|l| l.strip_prefix("max ")?.trim().parse().ok())
        })
        .unwrap_or(0)
}

fn pids_in_tree(dir: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> = fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                pids.extend(pids_in_tree(&entry.path()));
            }
        }
    }
    pids
}

/// Kills every process in a group and its children. A fork bomb may fork
/// while this runs, so it goes round until the group is empty; the
/// process limit bounds how long that takes.
fn kill_tree(dir: &Path) {
    let kill_file = dir.join("cgroup.kill");
    if kill_file.exists() && fs::write(&kill_file, "1").is_ok() {
        return;
    }
    for round in 0..200 {
        let pids = pids_in_tree(dir);
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            // SAFETY: kill(2) with a pid read from the group; no memory is shared.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(if round < 10 { 1 } else { 10 }));
    }
    tracing::warn!(group = %dir.display(), "processes survived repeated SIGKILL");
}

/// Removes a group and its children, deepest first. A killed process
/// leaves its group only once it is reaped, so removal is retried briefly.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_tree(&entry.path());
            }
        }
    }
    for _ in 0..100 {
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    tracing::warn!(group = %dir.display(), "could not remove the cgroup");
}

struct Mount {
    point: PathBuf,
    fstype: String,
    options: String,
}

fn parse_mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // <id> <parent> <dev> <root> <point> <opts> [optional…] - <fstype> <source> <super opts>
            let (left, right) = line.split_once(" - ")?;
            let point = left.split_whitespace().nth(4)?;
            let mut right = right.split_whitespace();
            let fstype = right.next()?.to_owned();
            let options = right.nth(1).unwrap_or("").to_owned();
            Some(Mount {
                point: PathBuf::from(unescape_mount(point)),
                fstype,
                options,
            })
        })
        .collect()
}

/// mountinfo escapes spaces and a few other bytes as octal.
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\134", "\\")
}

fn join(mount: &Path, cgroup_path: &str) -> PathBuf {
    mount.join(cgroup_path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_MOUNTS: &str = "\
24 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
25 24 0:23 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
26 24 0:24 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
28 24 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
31 24 0:29 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
33 24 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const V1_OWN: &str = "\
8:pids:/
4:memory:/process_api/98b9
1:cpu:/
0::/
";

    #[test]
    fn finds_v1_hierarchies_under_our_own_groups() {
        let h = Hierarchy::from_tables(V1_MOUNTS, V1_OWN).unwrap();
        assert_eq!(
            h,
            Hierarchy::V1 {
                memory: "/sys/fs/cgroup/memory/process_api/98b9/forgehand-sandboxes".into(),
                pids: "/sys/fs/cgroup/pids/forgehand-sandboxes".into(),
                cpu: "/sys/fs/cgroup/cpu/forgehand-sandboxes".into(),
            }
        );
    }

    #[test]
    fn finds_cpu_in_a_combined_v1_hierarchy() {
        let mounts = V1_MOUNTS.replace("rw,cpu\n", "rw,cpu,cpuacct\n");
        let own = V1_OWN.replace("1:cpu:/", "1:cpu,cpuacct:/system.slice/x.service");
        let Hierarchy::V1 { cpu, .. } = Hierarchy::from_tables(&mounts, &own).unwrap() else {
            panic!("v1 expected");
        };
        assert_eq!(
            cpu,
            PathBuf::from("/sys/fs/cgroup/cpu/system.slice/x.service/forgehand-sandboxes")
        );
    }

    /// What is written where on cgroup v2, against a directory tree
    /// standing in for the unified hierarchy (these machines run v1; the
    /// kernel's side of v2 is not exercised here).
    #[test]
    fn v2_limits_and_controllers_are_written_where_the_kernel_reads_them() {
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join("system.slice/forgehand.service");
        fs::create_dir_all(&own).unwrap();
        let hierarchy = Hierarchy::V2 {
            base: own.join(BASE),
        };
        let limits = Limits {
            memory_mib: 256,
            vcpus: 2,
            max_pids: 99,
            ..Limits::default()
        };
        let group = hierarchy.create("fh-1-2-abc", &limits).unwrap();
        let read = |p: &Path| fs::read_to_string(p).unwrap();
        let dir = own.join(BASE).join("fh-1-2-abc");
        assert_eq!(read(&dir.join("memory.max")), (256u64 << 20).to_string());
        assert_eq!(read(&dir.join("pids.max")), "99");
        assert_eq!(read(&dir.join("cpu.max")), "200000 100000");
        assert_eq!(
            read(&own.join("cgroup.subtree_control")),
            "+memory +pids +cpu"
        );
        assert_eq!(
            read(&own.join(BASE).join("cgroup.subtree_control")),
            "+memory +pids +cpu"
        );
        assert_eq!(group.join_files(), vec![dir.join("cgroup.procs")]);
        let exec = group.exec_group("exec-0").unwrap();
        assert_eq!(exec.join_files, vec![dir.join("exec-0/cgroup.procs")]);
    }

    #[test]
    fn finds_a_unified_hierarchy_that_has_the_controllers() {
        let mount = tempfile::tempdir().unwrap();
        fs::write(
            mount.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        let mountinfo = format!(
            "30 24 0:26 / {} rw,nosuid - cgroup2 cgroup2 rw\n",
            mount.path().display()
        );
        let h = Hierarchy::from_tables(&mountinfo, "0::/system.slice/forgehand.service\n").unwrap();
        assert_eq!(
            h,
            Hierarchy::V2 {
                base: mount
                    .path()
                    .join("system.slice/forgehand.service")
                    .join(BASE)
            }
        );
        // A hybrid host's v2 mount without the controllers is passed over.
        fs::write(mount.path().join("cgroup.controllers"), "").unwrap();
        let mixed = format!("{mountinfo}{V1_MOUNTS}");
        assert!(matches!(
            Hierarchy::from_tables(&mixed, V1_OWN).unwrap(),
            Hierarchy::V1 { .. }
        ));
    }

    #[test]
    fn says_what_is_missing() {
        let mounts = "25 24 0:23 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
        let err = Hierarchy::from_tables(mounts, "1:cpu:/\n").unwrap_err();
        assert!(err.contains("memory controller"), "{err}");
        assert!(err.contains("pids controller"), "{err}");
    }
}
