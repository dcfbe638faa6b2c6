//! How often the gate would hold a real project's commits: each commit of
//! a history (as `bench/gate_friction/extract.py` writes it: one JSON
//! object a line, the changed paths with their modes) classified by the
//! allow-list (`forgehand_gate::classify`) and by the catalogue it
//! replaced (`catalogue_holds`), the files' two versions read from the
//! repository's git directory where a kind is judged by content.
//!
//!   friction HISTORY.jsonl GIT_DIR [SAMPLE_SEED]
//!
//! Prints one JSON object: the counts, the top reasons, and a sample of
//! 50 commits the allow-list holds (for labelling by hand).

use std::collections::BTreeMap;
use std::path::Path;

use forgehand_gate::classify::{classify, Contents, Held, PathChange, RepoRules, Status, Verdict};
use forgehand_gate::integrity::catalogue_holds;
use serde_json::{json, Value};

struct AtCommit<'r> {
    repo: &'r git2::Repository,
    old: Option<git2::Tree<'r>>,
    new: git2::Tree<'r>,
    imported: std::cell::OnceCell<forgehand_gate::classify::imports::Imported>,
}

impl AtCommit<'_> {
    fn read(&self, tree: Option<&git2::Tree<'_>>, path: &str) -> Option<Vec<u8>> {
        let entry = tree?.get_path(Path::new(path)).ok()?;
        let blob = self.repo.find_blob(entry.id()).ok()?;
        Some(blob.content().to_vec())
    }
}

impl Contents for AtCommit<'_> {
    fn before(&self, path: &str) -> Option<Vec<u8>> {
        self.read(self.old.as_ref(), path)
    }
    fn after(&self, path: &str) -> Option<Vec<u8>> {
        self.read(Some(&self.new), path)
    }
    fn had_kind(&self, dir: &str, ext: &str) -> bool {
        self.old.as_ref().is_some_and(|tree| {
            forgehand_gate::classify::changes::had_kind(self.repo, tree, dir, ext)
        })
    }
    fn had_code_kind(&self, dir: &str, ext: &str) -> bool {
        self.old.as_ref().is_some_and(|tree| {
            forgehand_gate::classify::changes::had_code_kind(self.repo, tree, dir, ext)
        })
    }
    fn is_project_root(&self, dir: &str) -> bool {
        self.old.as_ref().is_some_and(|tree| {
            forgehand_gate::classify::changes::holds_manifest(self.repo, tree, dir)
        })
    }
    fn imported_by_agents(&self, path: &str) -> bool {
        let imported = self.imported.get_or_init(|| match &self.old {
            Some(tree) => forgehand_gate::classify::imports::agent_imports(self.repo, tree),
            None => Default::default(),
        });
        imported.contains(&forgehand_gate::classify::names::FoldedPath::new(path).joined())
    }
}

fn mode(value: &Value) -> Option<u32> {
    let mode = u32::from_str_radix(value.as_str()?, 8).ok()?;
    (mode != 0).then_some(mode)
}

/// The changes of one record, a rename being its old path removed and
/// its new one added.
fn changes(record: &Value) -> Vec<PathChange> {
    let mut out = Vec::new();
    for c in record["changes"].as_array().into_iter().flatten() {
        let path = c["path"].as_str().unwrap_or_default().to_owned();
        let (old_mode, new_mode) = (mode(&c["old_mode"]), mode(&c["new_mode"]));
        match c["status"].as_str().unwrap_or_default() {
            "A" | "C" => out.push(PathChange {
                path,
                status: Status::Added,
                old_mode: None,
                new_mode,
            }),
            "D" => out.push(PathChange {
                path,
                status: Status::Deleted,
                old_mode,
                new_mode: None,
            }),
            "R" => {
                let old = c["old_path"].as_str().unwrap_or_default().to_owned();
                out.push(PathChange {
                    path: old,
                    status: Status::Deleted,
                    old_mode,
                    new_mode: None,
                });
                out.push(PathChange {
                    path,
                    status: Status::Added,
                    old_mode: None,
                    new_mode,
                });
            }
            _ => out.push(PathChange {
                path,
                status: Status::Modified,
                old_mode,
                new_mode,
            }),
        }
    }
    out
}

/// Source or tests by kind: a file of a known language or in a test
/// directory, but not one of the files tools run or install from (those
/// are held by design, and not "only source and tests"): the commits the
/// 98% threshold is about.
fn source_or_test(path: &str) -> bool {
    use forgehand_gate::classify::known::{
        name_matches, ENTRY_POINTS, LOCKFILES, MANIFESTS, SOURCE_EXTENSIONS, TEST_DIRS,
    };
    use forgehand_gate::classify::names::FoldedPath;
    let p = FoldedPath::new(path);
    if p.components.iter().any(|c| c.starts_with('.')) {
        return false;
    }
    let name = p.name();
    if ENTRY_POINTS
        .iter()
        .any(|(pattern, _)| name_matches(pattern, name))
        || MANIFESTS.iter().any(|m| m.name == name)
        || LOCKFILES.contains(&name)
    {
        return false;
    }
    p.extension()
        .is_some_and(|e| SOURCE_EXTENSIONS.contains(&e))
        || p.dirs().iter().any(|d| TEST_DIRS.contains(&d.as_str()))
}

fn reason_key(why: &Held, path: &str) -> String {
    let p = forgehand_gate::classify::names::FoldedPath::new(path);
    let kind = match why {
        Held::Unknown(Some(ext)) => format!("unknown .{ext}"),
        Held::Unknown(None) => format!("unknown {}", p.name()),
        Held::DotPath => format!(
            "dot path {}",
            p.components
                .iter()
                .find(|c| c.starts_with('.'))
                .cloned()
                .unwrap_or_default()
        ),
        Held::EntryPoint(_) => format!("entry point {}", p.name()),
        Held::Manifest(_) => format!("manifest {}", p.name()),
        Held::Lockfile => format!("lockfile {}", p.name()),
        Held::AgentInstructions => format!("agent instructions {}", p.name()),
        other => format!("{other:?}")
            .split('(')
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    kind
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (history, git_dir) = (&args[1], &args[2]);
    let seed: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(25);
    let repo = git2::Repository::open_bare(git_dir)?;
    let rules = RepoRules::none();
    let (mut commits, mut held_new, mut held_old) = (0usize, 0usize, 0usize);
    let (mut st_commits, mut st_passed) = (0usize, 0usize);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut held_commits: Vec<Value> = Vec::new();
    let mut st_held: Vec<Value> = Vec::new();
    for line in std::fs::read_to_string(history)?.lines() {
        let record: Value = serde_json::from_str(line)?;
        let sha = record["sha"].as_str().unwrap_or_default();
        let commit = repo.find_commit(git2::Oid::from_str(sha)?)?;
        let contents = AtCommit {
            imported: Default::default(),
            repo: &repo,
            old: commit.parent(0).ok().and_then(|p| p.tree().ok()),
            new: commit.tree()?,
        };
        let changed = changes(&record);
        commits += 1;
        let mut held_paths = Vec::new();
        let mut old_held = false;
        for c in &changed {
            if let Verdict::Held { why, .. } = classify(c, &rules, &contents) {
                held_paths.push(json!({"path": c.path, "why": why.to_string()}));
                *reasons.entry(reason_key(&why, &c.path)).or_default() += 1;
            }
            let old = contents.before(&c.path);
            let new = contents.after(&c.path);
            old_held |= catalogue_holds(&c.path, old.as_deref(), new.as_deref());
        }
        if !held_paths.is_empty() {
            held_new += 1;
            held_commits
                .push(json!({"sha": sha, "subject": record["subject"], "held": held_paths}));
        }
        if old_held {
            held_old += 1;
        }
        if !changed.is_empty() && changed.iter().all(|c| source_or_test(&c.path)) {
            st_commits += 1;
            if held_paths.is_empty() {
                st_passed += 1;
            } else {
                st_held.push(json!({"sha": sha, "subject": record["subject"], "held": held_paths}));
            }
        }
    }
    // A fixed sample of the held commits, for labelling by hand.
    let mut x = seed.max(1);
    let mut sample = Vec::new();
    let mut pool = held_commits.clone();
    while sample.len() < 50 && !pool.is_empty() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = (x % pool.len() as u64) as usize;
        sample.push(pool.swap_remove(at));
    }
    let mut top: Vec<(String, usize)> = reasons.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    top.truncate(25);
    let share = |n: usize| {
        if commits == 0 {
            0.0
        } else {
            n as f64 / commits as f64
        }
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "commits": commits,
            "held_by_the_allow_list": held_new,
            "held_share": share(held_new),
            "held_by_the_catalogue": held_old,
            "catalogue_share": share(held_old),
            "points_more_held": (share(held_new) - share(held_old)) * 100.0,
            "source_and_tests_only": st_commits,
            "source_and_tests_only_passed": st_passed,
            "source_and_tests_pass_share": if st_commits == 0 { 1.0 } else { st_passed as f64 / st_commits as f64 },
            "source_and_tests_held": st_held,
            "top_reasons": top.iter().map(|(k, n)| json!([k, n])).collect::<Vec<_>>(),
            "sample": sample,
        }))?
    );
    Ok(())
}
