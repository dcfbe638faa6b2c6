//! `[git]`: where the host keeps repositories, how the bot names its
//! branches and signs its commits, and what it may push.

use std::path::PathBuf;

use forgehand_forge::git::branch_name;
use forgehand_gate::{BotIdentity, GatePolicy};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GitConfig {
    /// One bare mirror per repository, fetched incrementally.
    pub mirror_dir: PathBuf,
    /// Each job's working copy and, beside it, its git directory.
    pub work_dir: PathBuf,
    /// The bot's branches: `{number}` and `{slug}` are filled in; the
    /// fixed text before the first placeholder is the prefix that marks a
    /// branch as the bot's own (the only branches it pushes to).
    pub branch_pattern: String,
    /// Repositories (`owner/name`, or `*` for all) whose sensitive files
    /// (CI definitions, agent instructions, CODEOWNERS, build entry
    /// points) the agent's changes may touch and still be pushed. Always
    /// listed in the pull request. A TOML list, or one comma-separated
    /// string (the form environment variables use).
    #[serde(deserialize_with = "forgehand_types::config::string_list")]
    pub allow_sensitive: Vec<String>,
    /// SSH transport: the private key and the pinned host keys
    /// (`known_hosts` format). Both or neither.
    pub ssh_key_path: Option<PathBuf>,
    pub known_hosts_path: Option<PathBuf>,
    /// The author and committer of the bot's commits.
    pub commit_name: String,
    pub commit_email: String,
    /// A file the agent leaves larger than this refuses the push
    /// (`too_large`) and is never read; GitHub refuses files over 100 MiB.
    pub max_file_mib: u64,
    /// What the agent may add to the working tree's files, by length
    /// (sparse holes and each hard link count: the host's diff reads
    /// them), before the push is refused (`too_large`).
    pub max_added_mib: u64,
    /// Keep each job's directory (its working copy and git directory)
    /// when the job ends instead of removing it, for debugging; its path
    /// is logged. Off by default: a kept directory holds the repository's
    /// code and takes disk.
    pub keep_job_dirs: bool,
}

impl Default for GitConfig {
    fn default() -> Self {
        GitConfig {
            mirror_dir: "forgehand-data/mirrors".into(),
            work_dir: "forgehand-data/jobs".into(),
            branch_pattern: "forgehand/{number}-{slug}".into(),
            allow_sensitive: Vec::new(),
            ssh_key_path: None,
            known_hosts_path: None,
            commit_name: "forgehand[bot]".into(),
            commit_email: "forgehand@users.noreply.localhost".into(),
            max_file_mib: 100,
            max_added_mib: 1024,
            keep_job_dirs: false,
        }
    }
}

impl GitConfig {
    /// How much of the working copy the gate reads: each file up to
    /// `max_file_mib`, all of them together up to what the working copy's
    /// file system holds (`sandbox.disk_mib`, when it is limited).
    pub fn tree_limits(&self, disk_mib: u64) -> forgehand_gate::TreeLimits {
        let defaults = forgehand_gate::TreeLimits::default();
        forgehand_gate::TreeLimits {
            max_file_bytes: self.max_file_mib.saturating_mul(1 << 20),
            max_added_bytes: self.max_added_mib.saturating_mul(1 << 20),
            max_total_bytes: match disk_mib {
                0 => defaults.max_total_bytes,
                mib => mib.saturating_mul(1 << 20),
            },
            ..defaults
        }
    }

    /// How large a commit the shared checkouts write: each file up to
    /// `max_file_mib` (GitHub refuses larger files too), all of them, their
    /// number and their depth up to what the gate reads of a tree.
    pub fn checkout_limits(&self, disk_mib: u64) -> forgehand_forge::git::CheckoutLimits {
        let tree = self.tree_limits(disk_mib);
        forgehand_forge::git::CheckoutLimits {
            max_file_bytes: tree.max_file_bytes,
            max_total_bytes: tree.max_total_bytes,
            max_entries: tree.max_entries,
            max_depth: tree.max_depth,
        }
    }

    /// What marks a branch as the bot's: `forgehand/` by default.
    pub fn branch_prefix(&self) -> &str {
        let end = self.branch_pattern.find('{').unwrap_or(0);
        &self.branch_pattern[..end]
    }

    pub fn branch_for(&self, number: u64, title: &str) -> String {
        branch_name(&self.branch_pattern, number, title)
    }

    /// The gate's policy for `repo` (`owner/name`) when no maintainer has
    /// said `/forgehand allow-sensitive`.
    pub fn policy_for(&self, repo: &str) -> GatePolicy {
        GatePolicy {
            allow_sensitive: self
                .allow_sensitive
                .iter()
                .any(|r| r == "*" || r.eq_ignore_ascii_case(repo)),
            ..GatePolicy::default()
        }
    }

    pub fn identity(&self) -> BotIdentity {
        BotIdentity {
            name: self.commit_name.clone(),
            email: self.commit_email.clone(),
        }
    }

    pub fn problems(&self, problems: &mut Vec<String>) {
        if self.max_file_mib == 0 {
            problems.push("git.max_file_mib: must be at least 1".into());
        }
        let pattern = &self.branch_pattern;
        let prefix = self.branch_prefix();
        if !pattern.contains("{number}") {
            problems.push(format!(
                "git.branch_pattern: `{pattern}` must contain {{number}} so that each issue gets its own branch"
            ));
        } else if prefix.is_empty() || !prefix.ends_with('/') {
            problems.push(format!(
                "git.branch_pattern: `{pattern}` must start with a fixed directory like `forgehand/`: it marks the branches the bot owns"
            ));
        } else if !git2::Reference::is_valid_name(&format!(
            "refs/heads/{}",
            self.branch_for(1, "example")
        )) {
            problems.push(format!(
                "git.branch_pattern: `{pattern}` does not make a valid branch name"
            ));
        }
        for repo in &self.allow_sensitive {
            let valid = repo == "*"
                || repo
                    .split_once('/')
                    .is_some_and(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'));
            if !valid {
                problems.push(format!(
                    "git.allow_sensitive: `{repo}` is not `owner/name` or `*`"
                ));
            }
        }
        if self.ssh_key_path.is_some() != self.known_hosts_path.is_some() {
            problems.push(
                "git.known_hosts_path: SSH needs both git.ssh_key_path and git.known_hosts_path (host keys are pinned, never trusted on first use)".into(),
            );
        }
        if self.commit_name.trim().is_empty() || !self.commit_email.contains('@') {
            problems.push(
                "git.commit_email: the bot's commits need a name and an e-mail address".into(),
            );
        }
    }
}
