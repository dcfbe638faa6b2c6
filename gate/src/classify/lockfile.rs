//! Lockfiles judged by where they resolve from. A test run rewrites a
//! lockfile (a version moves, a checksum with it); that is the agent's
//! ordinary work. A lockfile that now resolves from a source it did not
//! before (another registry host, a git repository, a tarball URL; for
//! Go, a module path) names a new supplier of code, and is held.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::{Contents, Held, Ordinary, PathChange, Status};

/// Larger than this, a lockfile is not read (and so held).
const MAX_BYTES: usize = 32 << 20;

/// An URL: a scheme (`https`, `git+ssh`, `registry+https`, …) and what
/// follows up to a quote, a space or a bracket.
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>\]\)\},]+"#).expect("a valid pattern")
});

/// The verdict on a change to the lockfile named `name` (folded).
pub fn judge(name: &str, change: &PathChange, contents: &dyn Contents) -> Result<Ordinary, Held> {
    // A lockfile added or removed whole changes what every dependency
    // resolves to.
    if change.status != Status::Modified {
        return Err(Held::Lockfile(Vec::new()));
    }
    let read = |bytes: Option<Vec<u8>>| -> Option<String> {
        let bytes = bytes.filter(|b| b.len() <= MAX_BYTES)?;
        String::from_utf8(bytes).ok()
    };
    let Some(new) = read(contents.after(&change.path)) else {
        return Err(Held::Lockfile(Vec::new()));
    };
    let Some(old) = read(contents.before(&change.path)) else {
        return Err(Held::Lockfile(Vec::new()));
    };
    let (before, after) = (sources(name, &old), sources(name, &new));
    let new_sources: Vec<String> = after.difference(&before).cloned().collect();
    if new_sources.is_empty() {
        Ok(Ordinary::Lockfile)
    } else {
        Err(Held::Lockfile(new_sources))
    }
}

/// Where `text` resolves from: for `go.sum`, the module paths; for the
/// others, every URL's origin (scheme and host), and a git source whole
/// (a new repository on a known host is a new supplier).
pub fn sources(name: &str, text: &str) -> BTreeSet<String> {
    if name == "go.sum" {
        return text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect();
    }
    URL.find_iter(text).map(|m| origin(m.as_str())).collect()
}

fn origin(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let scheme = scheme.to_ascii_lowercase();
    if scheme.starts_with("git") || scheme.contains("+git") || scheme.ends_with("+ssh") {
        // The repository, without a revision or fragment.
        let whole = rest.split(['#', '?']).next().unwrap_or(rest);
        return format!(
            "{scheme}://{}",
            whole.trim_end_matches('/').to_ascii_lowercase()
        );
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    format!("{scheme}://{}", host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Two(String, String);
    impl Contents for Two {
        fn before(&self, _: &str) -> Option<Vec<u8>> {
            Some(self.0.clone().into_bytes())
        }
        fn after(&self, _: &str) -> Option<Vec<u8>> {
            Some(self.1.clone().into_bytes())
        }
    }

    fn change(path: &str) -> PathChange {
        PathChange {
            path: path.into(),
            status: Status::Modified,
            old_mode: Some(0o100644),
            new_mode: Some(0o100644),
        }
    }

    #[test]
    fn a_version_moved_is_ordinary_a_new_source_is_held() {
        let registry = "registry+https://github.com/rust-lang/crates.io-index";
        let old = format!("[[package]]\nname = \"serde\"\nversion = \"1.0.1\"\nsource = \"{registry}\"\nchecksum = \"aa\"\n");
        let bumped = old.replace("1.0.1", "1.0.2").replace("\"aa\"", "\"bb\"");
        assert_eq!(
            judge(
                "cargo.lock",
                &change("Cargo.lock"),
                &Two(old.clone(), bumped)
            ),
            Ok(Ordinary::Lockfile)
        );
        let git = format!("{old}[[package]]\nname = \"evil\"\nsource = \"git+https://github.com/evil/evil?rev=1#abc\"\n");
        assert_eq!(
            judge("cargo.lock", &change("Cargo.lock"), &Two(old, git)),
            Err(Held::Lockfile(vec![
                "git+https://github.com/evil/evil".into()
            ]))
        );
        let npm_old = r#"{"packages": {"node_modules/a": {"resolved": "https://registry.example/a/-/a-1.0.0.tgz"}}}"#;
        let npm_new =
            r#"{"packages": {"node_modules/a": {"resolved": "https://evil.example/a-1.0.0.tgz"}}}"#;
        assert_eq!(
            judge(
                "package-lock.json",
                &change("package-lock.json"),
                &Two(npm_old.into(), npm_new.into())
            ),
            Err(Held::Lockfile(vec!["https://evil.example".into()]))
        );
        let go_old = "golang.org/x/text v0.3.0 h1:aa=\n";
        let go_new = "golang.org/x/text v0.3.1 h1:bb=\nexample.com/evil v1.0.0 h1:cc=\n";
        assert_eq!(
            judge(
                "go.sum",
                &change("go.sum"),
                &Two(go_old.into(), go_new.into())
            ),
            Err(Held::Lockfile(vec!["example.com/evil".into()]))
        );
    }
}
