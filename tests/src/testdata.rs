//! The shared test data: real payloads written by GitHub, Gitea and
//! Forgejo, kept beside the checkout in `../shared/testdata` (see its
//! README.md), never copied into the project.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Where the shared test data must be: `<checkout>/../shared/testdata`.
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/testdata");

/// GitHub's examples, as `<event>/<action>.<n>.json`.
pub const GITHUB_EXAMPLES: &str = "github/webhook-examples";
/// Gitea's and Forgejo's examples, as `<source>/<name>.json`.
pub const GITEA_EXAMPLES: &str = "gitea/webhook-examples";

/// The test data folder; panics, naming the path, when it is missing.
pub fn root() -> PathBuf {
    let root = Path::new(ROOT);
    assert!(
        root.is_dir(),
        "the shared test data is missing: expected it at {} (`<checkout>/../shared/testdata`); \
         the end-to-end suite needs the shared test data to run",
        root.display()
    );
    root.to_path_buf()
}

/// A path inside the test data folder.
pub fn path(rel: &str) -> PathBuf {
    root().join(rel)
}

/// The bytes of a test data file, by its path inside the folder.
pub fn read(rel: &str) -> Vec<u8> {
    let path = path(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A test data file parsed as JSON.
pub fn json(rel: &str) -> Value {
    let body = read(rel);
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"))
}

/// Every `*.json` file under `dir` (inside the test data folder), as
/// paths relative to `dir` with `/` separators, sorted.
pub fn json_files(dir: &str) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                let rel = path.strip_prefix(root).expect("under the root");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let base = path(dir);
    assert!(
        base.is_dir(),
        "{} is missing from the shared test data",
        base.display()
    );
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

/// GitHub's example payloads, as `<event>/<action>.<n>.json`.
pub fn github_examples() -> Vec<String> {
    json_files(GITHUB_EXAMPLES)
}

/// Gitea's and Forgejo's example payloads, as `<source>/<name>.json`.
pub fn gitea_examples() -> Vec<String> {
    json_files(GITEA_EXAMPLES)
}

/// A GitHub example's body, by its path under `webhook-examples/`.
pub fn github_example(rel: &str) -> Vec<u8> {
    read(&format!("{GITHUB_EXAMPLES}/{rel}"))
}

/// A Gitea/Forgejo example's body, by its path under `webhook-examples/`.
pub fn gitea_example(rel: &str) -> Vec<u8> {
    read(&format!("{GITEA_EXAMPLES}/{rel}"))
}
