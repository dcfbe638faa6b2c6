//! How many files a sandbox's processes may hold open. The host's file
//! table (`fs.file-max`) is one for the whole machine: a sandbox whose
//! processes each opened as many files as Forgehand itself may (systemd
//! gives services a hard limit of 524,288) could fill it, and then no
//! process on the host could open a file. Each process of a sandbox gets
//! a hard limit such that all it may run at once (`max_pids`) hold at
//! most a quarter of the table; the guest user cannot raise it.

/// The share of the host's file table one sandbox may hold: one in this.
pub(crate) const SHARE_OF_FILE_TABLE: u64 = 4;
/// Below this, ordinary tools fail (bubblewrap itself failed with 64:
/// red-team round 6); a sandbox allowed so many processes
/// that this exceeds its share gets this all the same.
pub(crate) const MIN_PER_PROCESS: u64 = 256;
/// Above this no build needs more (and `select`-era tools misbehave).
pub(crate) const MAX_PER_PROCESS: u64 = 1 << 16;

/// The `RLIMIT_NOFILE` (soft and hard) each process of a sandbox with
/// `max_pids` gets on this host.
pub(crate) fn rlimit(max_pids: u32) -> libc::rlimit {
    let file_max = std::fs::read_to_string("/proc/sys/fs/file-max")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        // Unknown: assume a small machine's table.
        .unwrap_or(1 << 18);
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct given.
    let own_hard = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut own) } == 0 {
        own.rlim_max
    } else {
        MAX_PER_PROCESS
    };
    let n = per_process(file_max, max_pids, own_hard);
    libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    }
}

/// Each process's share: all `max_pids` of them together hold at most
/// [`SHARE_OF_FILE_TABLE`]th of `file_max`, within the bounds above,
/// and never more than Forgehand's own hard limit.
fn per_process(file_max: u64, max_pids: u32, own_hard: u64) -> u64 {
    (file_max / SHARE_OF_FILE_TABLE / u64::from(max_pids.max(1)))
        .clamp(MIN_PER_PROCESS, MAX_PER_PROCESS)
        .min(own_hard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_processes_together_hold_a_quarter_of_the_table() {
        // This machine: 2,466,165 files, 512 processes.
        let n = per_process(2_466_165, 512, 524_288);
        assert_eq!(n, 1204);
        assert!(n * 512 <= 2_466_165 / 4);
    }

    #[test]
    fn the_bounds_hold() {
        assert_eq!(per_process(u64::MAX, 1, u64::MAX), MAX_PER_PROCESS);
        assert_eq!(per_process(1000, 512, 524_288), MIN_PER_PROCESS);
        assert_eq!(per_process(2_466_165, 0, 524_288), MAX_PER_PROCESS);
        // Never above what Forgehand itself may hold.
        assert_eq!(per_process(2_466_165, 16, 1024), 1024);
    }
}
