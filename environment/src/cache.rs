//! Environments kept on disk, one directory each under their key, reused
//! by every job of the repository until the key changes, and evicted by
//! least recent use past `environment.cache_max_gib` or past
//! `environment.cache_max_entries` files and directories (a setup making
//! many empty files takes few blocks but many of the file system's
//! inodes), and removed once unused for `environment.max_idle_days`:
//!
//! ```text
//! <dir>/envs/<key>/info.json   what it is (repository, source, size, last use)
//! <dir>/envs/<key>/rootfs/     the Debian packages (and CA certificates) over the guest image
//! <dir>/envs/<key>/home/       what setup left in HOME
//! <dir>/envs/<key>/workspace/  what setup left in /workspace (an overlay's upper layer)
//! <dir>/envs/<key>.lock        held shared by each job using it, exclusively to remove it
//! <dir>/building/<key>.<pid>.<n>/   environments being built
//! ```
//!
//! A lock file is removed with the environment, and when a build of a
//! key that has none fails; only while it is held exclusively, and every
//! locker checks, once it holds the lock, that the file it locked is still
//! the one at the path (else it locks again): a lock on a removed file
//! would exclude no one who opens the path after.
//!
//! Everything is Forgehand's alone (0700) but the layers themselves,
//! which belong to the sandbox user (it reads them through an overlay,
//! and writes above them).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// What is known of a kept environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvInfo {
    pub key: String,
    /// `forge:owner/name`, or the root commit for `forgehand run`.
    pub repository: String,
    /// Where its declaration came from (`.forgehand.toml`, …).
    pub source: String,
    pub packages: Vec<String>,
    pub setup: Option<String>,
    /// Unix seconds.
    pub built_at: u64,
    pub last_used: u64,
    /// Bytes on disk, counted when it was kept.
    pub bytes: u64,
    /// Files, directories and links, counted when it was kept.
    #[serde(default)]
    pub entries: u64,
    /// How long its setup took, packages included.
    pub setup_secs: f64,
}

/// The directory environments are kept in, and how much they may take.
#[derive(Debug, Clone)]
pub struct EnvCache {
    dir: PathBuf,
    max_bytes: u64,
    max_entries: u64,
    /// Seconds unused after which an environment is removed.
    max_idle: Option<u64>,
}

/// A kept environment in use: it is not evicted while this lives.
#[derive(Debug)]
pub struct InUse {
    pub dir: PathBuf,
    pub info: EnvInfo,
    _lock: File,
}

impl InUse {
    /// The layer over the guest image, when the environment has one.
    pub fn rootfs(&self) -> Option<PathBuf> {
        let path = self.dir.join("rootfs");
        path.is_dir().then_some(path)
    }

    pub fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    /// What setup left in `/workspace`: a layer over the base commit.
    pub fn workspace(&self) -> PathBuf {
        self.dir.join("workspace")
    }
}

/// An environment being built: a scratch directory, removed unless kept.
#[derive(Debug)]
pub struct Building {
    pub dir: PathBuf,
    key: String,
    kept: bool,
    /// The key's lock file and environment, for the lock file to go when
    /// the build failed and the key has no environment.
    lock: PathBuf,
    env: PathBuf,
}

impl Drop for Building {
    fn drop(&mut self) {
        if !self.kept {
            remove_tree(&self.dir);
            forget_lock(&self.lock, &self.env);
        }
    }
}

/// Removes the lock file at `path` when no one holds it and there is no
/// environment at `env` (a build of its key failed); left when in use.
fn forget_lock(path: &Path, env: &Path) {
    if !path.exists() {
        return;
    }
    let Ok(lock) = lock(path, libc::LOCK_EX | libc::LOCK_NB) else {
        return;
    };
    if read_info(env).is_none() {
        let _ = std::fs::remove_file(path);
    }
    drop(lock);
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("the environment cache at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("environment {0} is in use by a job; try again when it is done")]
    InUse(String),
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.to_owned(),
        source,
    }
}

impl EnvCache {
    /// The cache at `dir` (made when missing), holding at most `max_gib`
    /// GiB; what a process that died left half-built is removed.
    pub fn open(dir: &Path, max_gib: u64) -> Result<Self, CacheError> {
        let cache = EnvCache {
            dir: std::path::absolute(dir).map_err(at(dir))?,
            max_bytes: max_gib.saturating_mul(1 << 30),
            max_entries: u64::MAX,
            max_idle: None,
        };
        for sub in ["envs", "building"] {
            private_dir(&cache.dir.join(sub))?;
        }
        private_dir(&cache.dir)?;
        cache.remove_stale_builds();
        Ok(cache)
    }

    /// At most `max` entries kept in all (`environment.cache_max_entries`).
    pub fn with_max_entries(mut self, max: u64) -> Self {
        self.max_entries = max;
        self
    }

    /// Environments unused for `days` removed (`environment.max_idle_days`;
    /// 0: never).
    pub fn with_max_idle_days(mut self, days: u64) -> Self {
        self.max_idle = (days > 0).then(|| days.saturating_mul(86_400));
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn env_dir(&self, key: &str) -> PathBuf {
        self.dir.join("envs").join(key)
    }

    fn lock_path(&self, key: &str) -> PathBuf {
        self.dir.join("envs").join(format!("{key}.lock"))
    }

    /// The environment kept under `key`, marked used now; `None` when
    /// there is none.
    pub fn get(&self, key: &str) -> Result<Option<InUse>, CacheError> {
        let dir = self.env_dir(key);
        let lock = lock(&self.lock_path(key), libc::LOCK_SH).map_err(at(&dir))?;
        let Some(mut info) = read_info(&dir) else {
            return Ok(None);
        };
        info.last_used = now();
        write_info(&dir, &info)?;
        Ok(Some(InUse {
            dir,
            info,
            _lock: lock,
        }))
    }

    /// A scratch directory to build environment `key` in.
    pub fn building(&self, key: &str) -> Result<Building, CacheError> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self
            .dir
            .join("building")
            .join(format!("{key}.{}.{n}", std::process::id()));
        remove_tree(&dir);
        private_dir(&dir)?;
        Ok(Building {
            dir,
            key: key.to_owned(),
            kept: false,
            lock: self.lock_path(key),
            env: self.env_dir(key),
        })
    }

    /// Keeps what was built (its `rootfs/`, `home/` and `workspace/`)
    /// under its key, then evicts the least recently used others past the
    /// cache's size. When another build of the same key finished first,
    /// that one is kept and this one dropped.
    pub fn keep(&self, mut building: Building, mut info: EnvInfo) -> Result<InUse, CacheError> {
        let key = building.key.clone();
        let dir = self.env_dir(&key);
        {
            let _lock = lock(&self.lock_path(&key), libc::LOCK_EX).map_err(at(&dir))?;
            if read_info(&dir).is_none() {
                remove_tree(&dir);
                let usage = usage(&building.dir);
                (info.bytes, info.entries) = (usage.bytes, usage.entries);
                info.key = key.clone();
                write_info(&building.dir, &info)?;
                std::fs::rename(&building.dir, &dir).map_err(at(&dir))?;
                building.kept = true;
            }
        }
        let in_use = self
            .get(&key)?
            .ok_or_else(|| at(&dir)(io::Error::other("the environment vanished as it was kept")))?;
        self.evict(&key);
        Ok(in_use)
    }

    /// Every kept environment, the most recently used first.
    pub fn list(&self) -> Vec<EnvInfo> {
        let mut envs: Vec<EnvInfo> = std::fs::read_dir(self.dir.join("envs"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| read_info(&e.path()))
            .collect();
        envs.sort_by_key(|e| std::cmp::Reverse(e.last_used));
        envs
    }

    /// Removes environment `key`; false when there was none. Refused while
    /// a job uses it.
    pub fn remove(&self, key: &str) -> Result<bool, CacheError> {
        let dir = self.env_dir(key);
        let _lock = match lock(&self.lock_path(key), libc::LOCK_EX | libc::LOCK_NB) {
            Ok(lock) => lock,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(CacheError::InUse(key.to_owned()))
            }
            Err(e) => return Err(at(&dir)(e)),
        };
        let existed = dir.exists();
        remove_tree(&dir);
        // Held exclusively: whoever waits on it sees it gone and locks the
        // next one.
        let _ = std::fs::remove_file(self.lock_path(key));
        Ok(existed)
    }

    /// Removes the environments unused for longer than the cache keeps
    /// them, then the least recently used (never `keep`, never one in
    /// use) until the rest fit the cache's size in bytes and in entries.
    pub fn evict(&self, keep: &str) -> Vec<String> {
        let mut envs = self.list();
        let mut evicted = Vec::new();
        if let Some(max_idle) = self.max_idle {
            let now = now();
            envs.retain(|env| {
                let idle = now.saturating_sub(env.last_used) > max_idle;
                if !idle || env.key == keep {
                    return true;
                }
                match self.remove(&env.key) {
                    Ok(_) => {
                        tracing::info!(key = %env.key, repository = %env.repository, "environment removed, unused (environment.max_idle_days)");
                        evicted.push(env.key.clone());
                        false
                    }
                    Err(error) => {
                        tracing::debug!(%error, "not removed");
                        true
                    }
                }
            });
        }
        let mut bytes: u64 = envs.iter().map(|e| e.bytes).sum();
        let mut entries: u64 = envs.iter().map(|e| e.entries).sum();
        while bytes > self.max_bytes || entries > self.max_entries {
            let Some(oldest) = envs.pop() else { break };
            if oldest.key == keep {
                continue;
            }
            match self.remove(&oldest.key) {
                Ok(_) => {
                    let limit = if bytes > self.max_bytes {
                        "environment.cache_max_gib"
                    } else {
                        "environment.cache_max_entries"
                    };
                    tracing::info!(key = %oldest.key, repository = %oldest.repository, bytes = oldest.bytes, entries = oldest.entries, limit, "environment evicted");
                    bytes = bytes.saturating_sub(oldest.bytes);
                    entries = entries.saturating_sub(oldest.entries);
                    evicted.push(oldest.key);
                }
                Err(error) => tracing::debug!(%error, "not evicted"),
            }
        }
        evicted
    }

    fn remove_stale_builds(&self) {
        let building = self.dir.join("building");
        for entry in std::fs::read_dir(&building).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let pid = name.split('.').nth(1).and_then(|p| p.parse::<u32>().ok());
            // A build of a live process (another node on this host) is
            // left to it.
            let alive = pid.is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
            if !alive {
                remove_tree(&entry.path());
            }
        }
    }
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn read_info(dir: &Path) -> Option<EnvInfo> {
    let text = std::fs::read(dir.join("info.json")).ok()?;
    serde_json::from_slice(&text).ok()
}

fn write_info(dir: &Path, info: &EnvInfo) -> Result<(), CacheError> {
    let path = dir.join("info.json");
    let tmp = dir.join("info.json.tmp");
    let text = serde_json::to_vec_pretty(info).expect("an EnvInfo serializes");
    std::fs::write(&tmp, text).map_err(at(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(at(&path))
}

fn private_dir(path: &Path) -> Result<(), CacheError> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(at(path)(e)),
    }
}

fn open_lock(path: &Path) -> io::Result<File> {
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

/// Locks the file at `path` (made when missing) with `operation`; once
/// held, it must still be the file at `path`, else it was removed (by a
/// holder of the exclusive lock) while this waited, and the one there now
/// is locked instead. `LOCK_NB` fails with `WouldBlock` when held.
fn lock(path: &Path, operation: libc::c_int) -> io::Result<File> {
    // Each retry means a removal of the file in between: a few at most.
    for _ in 0..100 {
        let file = open_lock(path)?;
        flock(&file, operation)?;
        let held = file.metadata()?;
        match std::fs::symlink_metadata(path) {
            Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => return Ok(file),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(
        "the lock file was replaced a hundred times while locking it",
    ))
}

fn flock(file: &File, operation: libc::c_int) -> io::Result<()> {
    // SAFETY: flock on a descriptor we hold.
    if unsafe { libc::flock(file.as_raw_fd(), operation) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Bytes the tree at `dir` takes on disk (blocks, so sparse files count
/// what they use), never following a symlink or leaving the file system.
/// What a tree takes on its file system.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub bytes: u64,
    pub entries: u64,
}

/// The blocks and entries of the tree at `dir`, on its own file system.
pub(crate) fn usage(dir: &Path) -> Usage {
    let Ok(top) = std::fs::symlink_metadata(dir) else {
        return Usage::default();
    };
    let device = top.dev();
    let mut total = Usage::default();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            total.bytes = total.bytes.saturating_add(meta.blocks() * 512);
            total.entries += 1;
            if meta.is_dir() && meta.dev() == device {
                pending.push(entry.path());
            }
        }
    }
    total
}

/// Removes a tree, never descending into another file system mounted in
/// it (an overlay left mounted by a process that died is unmounted
/// first).
pub(crate) fn remove_tree(dir: &Path) {
    if !dir.exists() {
        return;
    }
    forgehand_sandbox::disk::unmount_beneath(dir);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(repository: &str) -> EnvInfo {
        EnvInfo {
            key: String::new(),
            repository: repository.into(),
            source: ".forgehand.toml".into(),
            packages: vec!["nodejs".into()],
            setup: Some("npm ci".into()),
            built_at: now(),
            last_used: now(),
            bytes: 0,
            entries: 0,
            setup_secs: 1.5,
        }
    }

    fn build(cache: &EnvCache, key: &str, bytes: usize) -> InUse {
        let building = cache.building(key).unwrap();
        std::fs::create_dir(building.dir.join("home")).unwrap();
        std::fs::write(building.dir.join("home/blob"), vec![1u8; bytes]).unwrap();
        cache.keep(building, info("github:acme/widgets")).unwrap()
    }

    #[test]
    fn a_kept_environment_is_found_under_its_key_and_used_again() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::open(tmp.path(), 10).unwrap();
        assert!(cache.get("k1").unwrap().is_none());
        let kept = build(&cache, "k1", 4096);
        assert_eq!(kept.info.key, "k1");
        assert!(kept.info.bytes >= 4096, "{}", kept.info.bytes);
        drop(kept);
        let again = cache.get("k1").unwrap().unwrap();
        assert_eq!(
            std::fs::read(again.home().join("blob")).unwrap().len(),
            4096
        );
        assert_eq!(cache.list().len(), 1);
        assert!(std::fs::read_dir(tmp.path().join("building"))
            .unwrap()
            .next()
            .is_none());
    }

    #[test]
    fn a_build_dropped_unkept_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::open(tmp.path(), 10).unwrap();
        let building = cache.building("k").unwrap();
        std::fs::write(building.dir.join("x"), "y").unwrap();
        drop(building);
        assert!(std::fs::read_dir(tmp.path().join("building"))
            .unwrap()
            .next()
            .is_none());
        assert!(cache.get("k").unwrap().is_none());
    }

    /// Past the cache's size the least recently used go, never one in use.
    #[test]
    fn the_least_recently_used_are_evicted_but_never_one_in_use() {
        let tmp = tempfile::tempdir().unwrap();
        // 0 GiB: everything but the newest goes, unless in use.
        let cache = EnvCache::open(tmp.path(), 0).unwrap();
        let a = build(&cache, "a", 1 << 16);
        drop(a);
        let held = cache.get("a").unwrap().unwrap();
        let b = build(&cache, "b", 1 << 16);
        assert!(cache.get("a").unwrap().is_some(), "in use: kept");
        drop(held);
        drop(b);
        let c = build(&cache, "c", 1 << 16);
        let keys: Vec<String> = cache.list().into_iter().map(|e| e.key).collect();
        assert_eq!(keys, vec!["c".to_owned()], "a and b evicted once free");
        drop(c);
        assert!(matches!(cache.remove("c"), Ok(true)));
        assert!(matches!(cache.remove("c"), Ok(false)));
    }

    /// Issue 26: a setup making 150,000 empty files took 3 MiB and was
    /// never evicted by bytes. Entries are counted when kept, and past
    /// `cache_max_entries` the least recently used go.
    #[test]
    fn environments_are_evicted_by_entries_as_by_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::open(tmp.path(), 10)
            .unwrap()
            .with_max_entries(250);
        let many = |key: &str| {
            let building = cache.building(key).unwrap();
            std::fs::create_dir(building.dir.join("home")).unwrap();
            for i in 0..100 {
                std::fs::write(building.dir.join(format!("home/f{i}")), "").unwrap();
            }
            cache.keep(building, info("github:acme/widgets")).unwrap()
        };
        // Used one after the other (last use is kept in seconds: set).
        let used = |key: &str, ago: u64| {
            let dir = cache.env_dir(key);
            let mut info = read_info(&dir).unwrap();
            info.last_used = now() - ago;
            write_info(&dir, &info).unwrap();
        };
        let a = many("a");
        assert!(a.info.entries >= 100, "{}", a.info.entries);
        drop(a);
        used("a", 100);
        drop(many("b"));
        used("b", 50);
        let keys = |cache: &EnvCache| -> Vec<String> {
            let mut keys: Vec<String> = cache.list().into_iter().map(|e| e.key).collect();
            keys.sort();
            keys
        };
        assert_eq!(keys(&cache), ["a", "b"], "about 204 entries fit 250");
        drop(many("c"));
        assert_eq!(keys(&cache), ["b", "c"], "a, the least recently used, went");
    }

    /// `environment.max_idle_days`: one unused that long is removed.
    #[test]
    fn an_environment_unused_past_the_idle_days_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::open(tmp.path(), 10)
            .unwrap()
            .with_max_idle_days(30);
        drop(build(&cache, "old", 10));
        // Last used 31 days ago.
        let dir = cache.env_dir("old");
        let mut stale = read_info(&dir).unwrap();
        stale.last_used = now() - 31 * 86_400;
        write_info(&dir, &stale).unwrap();
        drop(build(&cache, "new", 10));
        let keys: Vec<String> = cache.list().into_iter().map(|e| e.key).collect();
        assert_eq!(keys, ["new"]);
    }

    #[test]
    fn an_environment_in_use_is_not_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::open(tmp.path(), 10).unwrap();
        let held = build(&cache, "k", 10);
        assert!(matches!(cache.remove("k"), Err(CacheError::InUse(_))));
        drop(held);
        assert!(matches!(cache.remove("k"), Ok(true)));
    }

    /// Red-team info: a key that got no environment (its build failed)
    /// kept its `.lock` file, one per failed build, forever.
    #[test]
    fn a_failed_build_leaves_no_lock_file() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::open(tmp.path(), 10).unwrap();
        assert!(cache.get("k").unwrap().is_none());
        let building = cache.building("k").unwrap();
        drop(building);
        assert!(!cache.lock_path("k").exists(), "the lock file stayed");
        // A kept one keeps its lock file.
        drop(build(&cache, "k", 10));
        assert!(cache.lock_path("k").exists());
    }

    /// Whether a `flock` of this process waits on the file with inode
    /// `ino`: `/proc/locks` lists each waiter as `N: -> FLOCK ... PID
    /// MAJ:MIN:INODE ...`.
    fn a_lock_waits_on(ino: u64) -> bool {
        let pid = std::process::id().to_string();
        let inode = format!(":{ino}");
        std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.get(1) == Some(&"->")
                    && fields.get(2) == Some(&"FLOCK")
                    && fields.get(5) == Some(&pid.as_str())
                    && fields.get(6).is_some_and(|f| f.ends_with(&inode))
            })
    }

    /// A lock file is removed only while held exclusively; whoever waited
    /// on it meanwhile must not trust it, or it would hold a lock on a
    /// file no one else can find: here a job holding the old file's lock
    /// while its environment was removed under the new one's.
    #[test]
    fn a_lock_file_removed_under_a_waiter_is_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = EnvCache::open(tmp.path(), 10).unwrap();
        drop(build(&cache, "k", 10));
        // A remover, as remove() is before it unlinks the lock file.
        let held = open_lock(&cache.lock_path("k")).unwrap();
        flock(&held, libc::LOCK_EX).unwrap();
        let old_lock = held.metadata().unwrap().ino();
        let waiter = {
            let cache = cache.clone();
            std::thread::spawn(move || cache.get("k").unwrap())
        };
        // The waiter opens the old lock file and waits on it: waited for
        // as the kernel shows it, not for a while (a hang detector bounds
        // it).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !a_lock_waits_on(old_lock) {
            assert!(
                std::time::Instant::now() < deadline,
                "hung: the waiter never waited on the lock file"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        remove_tree(&cache.env_dir("k"));
        std::fs::remove_file(cache.lock_path("k")).unwrap();
        // Another job builds and keeps the key again, under a new lock
        // file, before the remover lets go of the old one.
        drop(build(&cache, "k", 10));
        drop(held);
        let in_use = waiter.join().unwrap().expect("the environment kept again");
        assert!(
            matches!(cache.remove("k"), Err(CacheError::InUse(_))),
            "removed while a job uses it"
        );
        assert!(in_use.home().join("blob").exists());
        drop(in_use);
        assert!(matches!(cache.remove("k"), Ok(true)));
    }
}
