//! `[gate]`: the operator's limits on what the agent's change may do
//! before a maintainer must allow it. (What a repository's maintainers
//! tune lives in its own `.forgehand.toml`; see docs/security.md.)

use forgehand_gate::DEFAULT_MAX_REMOVED_SHARE;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateConfig {
    /// The share (0 to 1) of a repository's tracked files, or of their
    /// bytes, a change may delete or empty before it is refused as
    /// `destructive` (a change leaving no file is refused whatever this
    /// says); `/forgehand allow-destructive` or `run --allow-destructive`
    /// lets one through.
    pub max_removed_share: f64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            max_removed_share: DEFAULT_MAX_REMOVED_SHARE,
        }
    }
}

impl GateConfig {
    pub(super) fn problems(&self, problems: &mut Vec<String>) {
        let share = self.max_removed_share;
        if !(share.is_finite() && (0.0..=1.0).contains(&share)) {
            problems.push(format!(
                "gate.max_removed_share: a share from 0 to 1 (0.5 is half), got {share}"
            ));
        }
    }
}
