//! The environment's inputs: the files the setup sees, and the only
//! files its key covers.
//!
//! The setup runs over a view of the repository that holds these and
//! nothing else (`crate::build`), so it cannot read what the key does not
//! cover: a setup that needs another file fails, with its own error and a
//! hint naming `[environment] inputs`, rather than reusing an environment
//! that no longer matches. (An earlier design read the setup's scripts to
//! guess what they open; every red-team round found a narrower miss, and a
//! miss was a silent stale environment.)
//!
//! The inputs are:
//! - the lockfiles, manifests and package-manager settings the detected
//!   toolchains install from, present at the root ([`KNOWN`]);
//! - pip requirement files (`requirements*.txt` at the root and
//!   `requirements/*.txt`) and what they include (`-r`, `-c`);
//! - what the repository adds with `[environment] inputs = ["globs"]`,
//!   which adds to the above and never turns it off; `"**"` is the whole
//!   tree (the key is then the tree's id: a new environment per commit).

use std::collections::{BTreeSet, VecDeque};

use super::{FilesError, RepoFiles, MAX_DETECT_BYTES};

/// Lockfiles, manifests and package-manager settings at the root.
pub const KNOWN: [&str; 26] = [
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    ".npmrc",
    "pnpm-lock.yaml",
    "pnpm-workspace.yaml",
    "yarn.lock",
    ".yarnrc",
    ".yarnrc.yml",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "uv.lock",
    "poetry.lock",
    "pdm.lock",
    "Pipfile.lock",
    ".python-version",
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain",
    "rust-toolchain.toml",
    ".cargo/config.toml",
    "go.mod",
    "go.sum",
    "go.work",
    "go.work.sum",
];

/// Requirement files read to follow their includes, at most.
const MAX_REQUIREMENT_FILES: usize = 32;
/// Entries of the tree walked to match `inputs` patterns, at most.
pub const MAX_WALKED: usize = 500_000;
/// Files a view holds, at most: past it, `inputs = ["**"]` says what is
/// meant (the whole tree) without copying it file by file.
pub const MAX_INPUTS: usize = 10_000;
/// The pattern that means the whole tree.
pub const WHOLE_TREE: &str = "**";

/// What the setup sees of the repository.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inputs {
    /// The files (and links) the view holds, sorted.
    pub files: Vec<String>,
    /// The whole tree instead (`inputs = ["**"]`, or a devcontainer that
    /// names none).
    pub whole_tree: bool,
}

/// The inputs of `files`' environment, with the repository's `patterns`
/// (already checked: [`check_pattern`]).
pub(super) fn inputs(
    files: &dyn RepoFiles,
    patterns: &[String],
    whole_tree: bool,
) -> Result<Inputs, FilesError> {
    let mut found: BTreeSet<String> = KNOWN
        .iter()
        .filter(|path| files.exists(path) || files.link(path).is_some())
        .map(|path| path.to_string())
        .collect();
    if whole_tree || patterns.iter().any(|p| p == WHOLE_TREE) {
        return Ok(Inputs {
            files: found.into_iter().collect(),
            whole_tree: true,
        });
    }
    let requirements: Vec<String> = files
        .list("", 4096)
        .into_iter()
        .filter(|name| is_requirements(name))
        .chain(
            files
                .list("requirements", 4096)
                .into_iter()
                .map(|name| format!("requirements/{name}"))
                .filter(|path| is_requirements(path)),
        )
        .filter(|path| files.exists(path) || files.link(path).is_some())
        .collect();
    for (path, _) in requirement_closure(files, requirements)? {
        found.insert(path);
    }
    if !patterns.is_empty() {
        let set = glob_set(patterns);
        for path in files.ending_with(&[""], MAX_WALKED)? {
            if set.is_match(&path) {
                found.insert(path);
            }
        }
    }
    if found.len() > MAX_INPUTS {
        return Err(FilesError::TooManyInputs { max: MAX_INPUTS });
    }
    Ok(Inputs {
        files: found.into_iter().collect(),
        whole_tree: false,
    })
}

/// Why a pattern of `inputs` is refused, if it is.
pub(super) fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("an empty pattern".into());
    }
    if pattern.starts_with('/') {
        return Err("a pattern is relative to the repository's root: no leading `/`".into());
    }
    if pattern.split('/').any(|part| part == "..") {
        return Err("a pattern cannot leave the repository (`..`)".into());
    }
    glob(pattern).map(|_| ()).map_err(|e| e.kind().to_string())
}

fn glob(pattern: &str) -> Result<globset::Glob, globset::Error> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

fn glob_set(patterns: &[String]) -> globset::GlobSet {
    let mut set = globset::GlobSetBuilder::new();
    for pattern in patterns {
        // Checked when the declaration was read.
        if let Ok(glob) = glob(pattern) {
            set.add(glob);
        }
    }
    set.build().unwrap_or_else(|_| globset::GlobSet::empty())
}

/// Whether `path` is a pip requirement file, by the usual names
/// (`requirements*.txt`, `requirements/*.txt`).
fn is_requirements(path: &str) -> bool {
    let mut parts = path.rsplit('/');
    let name = parts.next().unwrap_or(path);
    let parent = parts.next();
    name.ends_with(".txt") && (name.starts_with("requirements") || parent == Some("requirements"))
}

/// Each requirement file from `roots` and what it includes (`-r`, `-c`),
/// with its text when it could be read (absent or too large: none), at
/// most [`MAX_REQUIREMENT_FILES`] files.
pub(super) fn requirement_closure(
    files: &dyn RepoFiles,
    roots: Vec<String>,
) -> Result<Vec<(String, Option<String>)>, FilesError> {
    let mut seen: BTreeSet<String> = roots.iter().cloned().collect();
    let mut queue: VecDeque<String> = roots.into();
    let mut out = Vec::new();
    while let Some(path) = queue.pop_front() {
        if out.len() == MAX_REQUIREMENT_FILES {
            break;
        }
        let Some(text) = read_text(files, &path)? else {
            if files.exists(&path) {
                out.push((path, None));
            }
            continue;
        };
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
        for include in includes(&text).filter_map(|target| normalize(dir, target)) {
            if seen.insert(include.clone()) {
                queue.push_back(include);
            }
        }
        out.push((path, Some(text)));
    }
    Ok(out)
}

/// The files a requirement file's `-r`/`--requirement`/`-c`/`--constraint`
/// lines name, as written.
fn includes(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        let line = line.split(" #").next().unwrap_or(line).trim();
        for option in ["--requirement", "--constraint", "-r", "-c"] {
            if let Some(rest) = line.strip_prefix(option) {
                let rest = rest.strip_prefix('=').unwrap_or(rest).trim();
                return (!rest.is_empty()).then_some(rest);
            }
        }
        None
    })
}

/// The text of a file read for detection: `None` when absent or larger
/// than detection reads (detection then knows less, and says nothing
/// wrong); a read failure is an error.
pub(super) fn read_text(files: &dyn RepoFiles, path: &str) -> Result<Option<String>, FilesError> {
    match files.read(path, MAX_DETECT_BYTES) {
        Ok(bytes) => Ok(bytes.map(|bytes| String::from_utf8_lossy(&bytes).into_owned())),
        Err(FilesError::TooLarge { .. }) => {
            tracing::debug!(path, "too large to read for detection");
            Ok(None)
        }
        Err(error) => Err(error),
    }
}

/// `target`, relative to `dir`, as a path inside the repository; `None`
/// when it is absolute, a URL, empty, or leaves the repository.
fn normalize(dir: &str, target: &str) -> Option<String> {
    if target.is_empty()
        || target.starts_with('/')
        || target.contains("://")
        || target.contains('\\')
    {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|part| !part.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::testing::MapFiles;

    fn files_of(inputs: Inputs) -> Vec<String> {
        assert!(!inputs.whole_tree);
        inputs.files
    }

    #[test]
    fn known_files_and_requirement_files_are_inputs_and_nothing_else() {
        let files = MapFiles::new()
            .with("package-lock.json", "{}")
            .with("Cargo.lock", "")
            .with("README.md", "")
            .with("setup.py", "")
            .with("scripts/setup.sh", "")
            .with("src/package-lock.json", "{}")
            .with("requirements-dev.txt", "-r requirements/base.txt\n")
            .with("requirements/base.txt", "-c ../constraints.txt\nflask\n")
            .with("constraints.txt", "flask==3.0\n");
        assert_eq!(
            files_of(inputs(&files, &[], false).unwrap()),
            [
                "Cargo.lock",
                "constraints.txt",
                "package-lock.json",
                "requirements-dev.txt",
                "requirements/base.txt",
            ]
        );
    }

    /// A link is an input as a link: the view holds it as stored.
    #[test]
    fn a_known_file_that_is_a_link_is_an_input() {
        let files = MapFiles::new()
            .link("package.json", "web/package.json")
            .with("web/package.json", "{}");
        assert_eq!(
            files_of(inputs(&files, &[], false).unwrap()),
            ["package.json"]
        );
    }

    #[test]
    fn patterns_add_to_what_is_found() {
        let files = MapFiles::new()
            .with("package.json", "{}")
            .with("scripts/setup.sh", "")
            .with("scripts/deep/other.sh", "")
            .with("patches/a.patch", "")
            .with("patches/x/b.patch", "")
            .with("src/index.js", "");
        let patterns = ["scripts/*.sh".to_owned(), "patches/**".to_owned()];
        assert_eq!(
            files_of(inputs(&files, &patterns, false).unwrap()),
            [
                "package.json",
                "patches/a.patch",
                "patches/x/b.patch",
                "scripts/setup.sh"
            ]
        );
        let whole = inputs(&files, &["**".to_owned()], false).unwrap();
        assert!(whole.whole_tree);
    }

    #[test]
    fn patterns_that_leave_the_root_or_do_not_parse_are_refused() {
        assert!(check_pattern("tools/*.sh").is_ok());
        assert!(check_pattern("**").is_ok());
        assert!(check_pattern("").is_err());
        assert!(check_pattern("/etc/passwd").is_err());
        assert!(check_pattern("../x").is_err());
        assert!(check_pattern("a/../../x").is_err());
        assert!(check_pattern("a[").is_err());
    }

    #[test]
    fn too_many_inputs_say_to_take_the_whole_tree() {
        let mut files = MapFiles::new();
        for i in 0..=MAX_INPUTS {
            files = files.with(&format!("data/{i}.json"), "");
        }
        let error = inputs(&files, &["data/*.json".to_owned()], false).unwrap_err();
        assert!(error.to_string().contains("inputs = [\"**\"]"), "{error}");
    }
}
