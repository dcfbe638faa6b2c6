//! Sandbox names that say which process owns them, so that another
//! process can tell a leftover from a live sandbox: `fh-<pid>-<start
//! time>-<random>`. Both backends name their sandboxes this way (the
//! namespace backend's cgroups, the microvm backend's VMs).

/// Every name a backend gives starts with this.
pub(crate) const PREFIX: &str = "fh-";

/// A fresh name owned by this process. Valid for microsandbox too (an
/// alphanumeric first, then alphanumerics and hyphens; short enough for
/// the Unix socket paths it derives from a name).
pub(crate) fn sandbox_name() -> String {
    let pid = std::process::id();
    format!(
        "{PREFIX}{pid}-{}-{:012x}",
        process_start(pid).unwrap_or(0),
        rand::random::<u64>() >> 16
    )
}

/// Whether `name` is one of ours whose owner process is gone. Names of
/// another shape are not ours to judge.
pub(crate) fn owner_is_gone(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let mut parts = rest.split('-');
    let (Some(pid), Some(start), Some(_suffix)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
        return false;
    };
    process_start(pid) != Some(start)
}

/// This process, as `<pid> <start time>`: written beside what it owns
/// on disk, so another process can tell whether the owner still runs.
pub fn this_process() -> String {
    let pid = std::process::id();
    format!("{pid} {}", process_start(pid).unwrap_or(0))
}

/// Whether the process `owner` ([`this_process`]'s form) still runs:
/// the pid alive with the same start time. What is not of that form is
/// taken to be alive (not ours to judge).
pub fn is_alive(owner: &str) -> bool {
    let mut parts = owner.split_whitespace();
    let (Some(Ok(pid)), Some(Ok(start))) = (
        parts.next().map(str::parse::<u32>),
        parts.next().map(str::parse::<u64>),
    ) else {
        return true;
    };
    process_start(pid) == Some(start)
}

/// Start time of a process (clock ticks since boot): with the pid, it
/// names a process even after the pid is reused.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22; the command name (field 2) may hold spaces and parentheses.
    let after_name = &stat[stat.rfind(')')? + 2..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_for_microsandbox_and_ours() {
        let name = sandbox_name();
        assert!(name.starts_with("fh-"), "{name}");
        assert!(name.len() < 48, "{name}");
        assert_ne!(name, sandbox_name(), "a random suffix");
    }

    #[test]
    fn leftovers_are_sandboxes_whose_owner_is_gone() {
        assert!(!owner_is_gone(&sandbox_name()), "our own sandbox");
        let me = std::process::id();
        // A pid that exists with another start time, and one that cannot exist.
        assert!(owner_is_gone(&format!("fh-{me}-1-abc")));
        assert!(owner_is_gone("fh-4194999-5-abc"));
        // Not ours: another prefix, too few parts, not numbers.
        assert!(!owner_is_gone("someone-else"));
        assert!(!owner_is_gone("fh-4194999-5"));
        assert!(!owner_is_gone("fh-x-5-abc"));
        assert!(!owner_is_gone("fh-4194999-y-abc"));
        assert!(!owner_is_gone("python-sandbox"));
    }
}
