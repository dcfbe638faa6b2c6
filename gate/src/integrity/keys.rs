//! The content-aware rows: of a TOML file, only some keys make a build run
//! new code (a Cargo manifest's `package.build` and dependency tables, not
//! its `version` or `description`).
//! What those keys hold is reduced to a digest; a file that does not parse
//! has none, and counts as changed whenever its bytes change.

use sha2::{Digest, Sha256};

/// Larger than this, a TOML file is not parsed (and so counts as
/// unparsable): no manifest comes near it.
pub(crate) const MAX_TOML_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keys {
    /// Not UTF-8, not TOML, or too large: fails closed.
    Unparsable,
    /// None of the watched keys is there.
    Absent,
    /// A digest of every watched key and what it holds.
    Digest([u8; 32]),
}

/// What `selectors` (`a.b`, `*` for any one key) select in `text`.
pub(crate) fn select(text: &[u8], selectors: &[&str]) -> Keys {
    if text.len() > MAX_TOML_BYTES {
        return Keys::Unparsable;
    }
    let Ok(table) = std::str::from_utf8(text)
        .map_err(drop)
        .and_then(|t| t.parse::<toml::Table>().map_err(drop))
    else {
        return Keys::Unparsable;
    };
    let mut found = Vec::new();
    for selector in selectors {
        let segments: Vec<&str> = selector.split('.').collect();
        collect(&table, &segments, selector, &mut String::new(), &mut found);
    }
    if found.is_empty() {
        return Keys::Absent;
    }
    found.sort();
    let mut hasher = Sha256::new();
    for line in found {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    Keys::Digest(hasher.finalize().into())
}

fn collect(
    table: &toml::Table,
    segments: &[&str],
    selector: &str,
    path: &mut String,
    found: &mut Vec<String>,
) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    for (key, value) in table {
        if *first != "*" && first != key {
            continue;
        }
        let before = path.len();
        path.push_str(&format!("[{key:?}]"));
        if rest.is_empty() {
            found.push(format!("{selector} {path} = {value:?}"));
        } else if let toml::Value::Table(inner) = value {
            collect(inner, rest, selector, path, found);
        }
        path.truncate(before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CARGO: &[&str] = &["package.build", "target.*.build-dependencies", "patch"];

    #[test]
    fn only_the_selected_keys_count() {
        let base = select(
            b"[package]\nname = \"x\"\n[dependencies]\nserde = \"1\"\n",
            CARGO,
        );
        assert_eq!(base, Keys::Absent);
        let more_deps = select(
            b"[package]\nname = \"x\"\nversion = \"2\"\n[dependencies]\nserde = \"1\"\nrand = \"0.8\"\n",
            CARGO,
        );
        assert_eq!(more_deps, Keys::Absent, "ordinary edits select nothing");
        let build = select(b"[package]\nname = \"x\"\nbuild = \"gen.rs\"\n", CARGO);
        assert!(matches!(build, Keys::Digest(_)));
        let other_build = select(b"[package]\nbuild = \"other.rs\"\nname = \"x\"\n", CARGO);
        assert!(matches!(other_build, Keys::Digest(_)) && other_build != build);
        let same_build = select(b"[package]\nbuild = \"gen.rs\"\nname = \"y\"\n", CARGO);
        assert_eq!(same_build, build, "other keys do not move the digest");
        let target = select(
            b"[target.'cfg(unix)'.build-dependencies]\ncc = \"1\"\n",
            CARGO,
        );
        assert!(matches!(target, Keys::Digest(_)));
        let patch = select(
            b"[patch.crates-io]\nserde = { path = \"../serde\" }\n",
            CARGO,
        );
        assert!(matches!(patch, Keys::Digest(_)) && patch != target);
    }

    #[test]
    fn what_does_not_parse_fails_closed() {
        assert_eq!(select(b"[package\nname = ", CARGO), Keys::Unparsable);
        assert_eq!(select(b"\xff\xfe", CARGO), Keys::Unparsable);
        let mut big = b"a = 1\n".repeat(MAX_TOML_BYTES / 6 + 1);
        big.truncate(MAX_TOML_BYTES + 1);
        assert_eq!(select(&big, CARGO), Keys::Unparsable);
        let deep = format!("a = {}1{}\n", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(select(deep.as_bytes(), CARGO), Keys::Unparsable);
    }
}
