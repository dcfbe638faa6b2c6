//! What a symlink at a catalogue path leads to. `CLAUDE.md -> docs/ai.md`
//! or `.github -> ci/github` makes a file elsewhere in the tree the one
//! CI or an agent reads; the snapshot records that file as well, under
//! the path it is read as (`alias/<as>\n<real>`: `\n` never appears in a
//! [`shown`] path), so a later change to it counts as a change there.
//! Links met inside what a link leads to are not followed further.

use std::io;
use std::path::{Path, PathBuf};

use super::catalogue::rule_for;
use super::walk::{self, Budget, Ignores, Item, Kind};
use super::{read_entry, shown, Recorder, SnapshotError, TreeLimits};

/// A symlink at (or on the way to) a catalogue path, and where it
/// resolves in the tree.
pub(super) struct Alias {
    pub link: PathBuf,
    pub target: PathBuf,
}

pub(super) fn record(
    worktree: &Path,
    aliases: &[Alias],
    ignores: &dyn Ignores,
    limits: TreeLimits,
    budget: &mut Budget,
    recorder: &mut Recorder,
) -> Result<(), SnapshotError> {
    for Alias { link, target } in aliases {
        let real = worktree.join(target);
        let meta = match std::fs::symlink_metadata(&real) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(SnapshotError::io(&real, e)),
        };
        let item = Item {
            rel: target,
            path: &real,
            meta: &meta,
            kind: walk::kind_of(&meta),
        };
        match item.kind {
            Kind::Dir => walk::walk(worktree, target, None, ignores, budget, &mut |item| {
                let inner = item.rel.strip_prefix(target).unwrap_or(item.rel);
                record_one(&link.join(inner), item, limits, recorder)
            })?,
            _ => record_one(link, &item, limits, recorder)?,
        }
    }
    Ok(())
}

fn record_one(
    read_as: &Path,
    item: &Item<'_>,
    limits: TreeLimits,
    recorder: &mut Recorder,
) -> Result<(), SnapshotError> {
    if matches!(item.kind, Kind::Dir | Kind::Symlink) {
        return Ok(());
    }
    let (read_as, real) = (shown(read_as), shown(item.rel));
    let Some(rule) = rule_for(&read_as) else {
        return Ok(());
    };
    if rule_for(&real).is_some() {
        // Watched where it is already.
        return Ok(());
    }
    let entry = read_entry(item, Some(rule), limits)?;
    recorder.insert(format!("alias/{read_as}\n{real}"), entry)
}
