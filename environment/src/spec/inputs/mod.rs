//! The files whose contents define an environment: the key covers them, so
//! a changed lockfile builds a new environment rather than reusing a stale
//! one.
//!
//! Whoever wrote the setup (the repository, a devcontainer, detection), it
//! reads the lockfiles and manifests at the root: all those present are
//! inputs, whatever the source. Listing one too many costs a rebuild when
//! it changes; listing one too few reuses an environment that no longer
//! matches, which is the failure to avoid. Two more kinds are added: the
//! files a setup line names (`-r requirements-dev.txt`,
//! `./scripts/setup.sh`), found by looking each word up in the tree, and
//! the files those name in turn (what `setup.sh` runs), and the files pip
//! requirement files include (`-r`, `-c`), each followed through a
//! bounded number of files. How a name is looked up is `found.rs`; how a
//! shell line splits into names, `words.rs`; what make remakes a file
//! from, `make.rs`.

use std::collections::{BTreeSet, VecDeque};

mod found;
mod make;
mod words;

use found::{Found, COMPILED, MAX_WALKED};
use make::{is_makefile, make_rules, MAX_MAKE_RULES};

use super::{FilesError, RepoFiles, MAX_DETECT_BYTES};

/// Lockfiles, manifests and package-manager settings at the root.
const KNOWN: [&str; 25] = [
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    ".npmrc",
    "pnpm-lock.yaml",
    "pnpm-workspace.yaml",
    "yarn.lock",
    ".yarnrc",
    ".yarnrc.yml",
    "requirements.txt",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "uv.lock",
    "poetry.lock",
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

/// Words of a setup line (or of a script it runs) looked up as paths, at
/// most.
const MAX_MENTIONED: usize = 512;
/// Scripts (and the package managers' files) read to follow what they
/// run, at most.
const MAX_SCRIPTS: usize = 64;
/// Requirement files read to follow their includes, at most.
const MAX_REQUIREMENT_FILES: usize = 32;

/// The inputs of an environment whose setup is `setup`, sorted.
pub(super) fn inputs(
    files: &dyn RepoFiles,
    setup: Option<&str>,
) -> Result<Vec<String>, FilesError> {
    let mut found: BTreeSet<String> = KNOWN
        .iter()
        .filter(|path| files.exists(path))
        .map(|path| path.to_string())
        .collect();
    for path in scripts(files, setup.unwrap_or_default())? {
        found.insert(path);
    }

    let roots = found
        .iter()
        .filter(|path| is_requirements(path))
        .cloned()
        .collect();
    for (path, _) in requirement_closure(files, roots)? {
        found.insert(path);
    }
    Ok(found.into_iter().collect())
}

/// The files the setup line names, and the files those name in turn (a
/// `setup.sh` that runs `tools/install.sh`), through at most
/// [`MAX_SCRIPTS`] files read. Each word is resolved as the sandbox
/// would resolve it ([`Found::resolve`]: `/workspace/…` is the
/// repository, `..` and links in any component as the kernel walks them,
/// shell quoting honoured), from the root, from the naming file's
/// directory, and from each directory the same text names (`cd tools &&
/// cd sub && sh install.sh`, `make -C web`), whose lockfiles and
/// manifests are inputs too; a link is an input and so is what it points
/// to; `make` names its Makefile (and `just`, `task`, `rake`, `tox`,
/// `nox`, `invoke` theirs); `node lib/main` names `lib/main.js`, `node
/// lib` its `index.js` and its `package.json`'s `main`; `python3 -m
/// tools.install` names `tools/install.py`. Listing a file that is not
/// run costs a rebuild when it changes; missing one that is run would
/// reuse an environment that no longer matches its base. What a script
/// reads without naming it (an import, a glob, a variable) is not
/// followed: docs/environments.md says so.
fn scripts(files: &dyn RepoFiles, setup: &str) -> Result<BTreeSet<String>, FilesError> {
    let mut found = Found {
        files,
        paths: BTreeSet::new(),
        queue: VecDeque::new(),
        make: false,
        make_rules: Vec::new(),
        named: Vec::new(),
    };
    found.look("", setup)?;
    // The package managers' own files name scripts too: npm runs
    // package.json's lifecycle scripts, yarn its `yarn-path`, pip a local
    // project a requirement line names (`-e ./localpkg`).
    for known in KNOWN {
        found.add_file(known);
    }
    // Python runs compiled files before (or without) their sources: an
    // unchecked `__pycache__/x.cpython-311.pyc`, a `x.pyc` alone, or an
    // extension module (`x.cpython-311-x86_64-linux-gnu.so`, tried before
    // `x.py` and before a package's `__init__.py`) runs whatever its
    // source says. Committed ones are rare: all count, wherever they are,
    // links with what they point to. They are not read as scripts.
    for path in files.ending_with(COMPILED, MAX_WALKED)? {
        found.add_unread(&path);
    }
    let mut read = 0;
    loop {
        let Some(path) = found.queue.pop_front() else {
            // What the Makefiles' own pattern rules make the names from,
            // now that every Makefile read has given its rules.
            if found.apply_make_rules() {
                continue;
            }
            break;
        };
        if read == MAX_SCRIPTS {
            break;
        }
        // A lockfile pins versions and names no script.
        if is_lockfile(&path) {
            continue;
        }
        let Some(text) = read_text(files, &path)? else {
            continue;
        };
        read += 1;
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir).to_owned();
        // A JSON file's commands are its strings (package.json's scripts),
        // each looked at as a line of its own.
        let text = match path.ends_with(".json") {
            true => json_strings(&text).unwrap_or(text),
            false => text,
        };
        if is_makefile(&path) {
            found
                .make_rules
                .extend(make_rules(&text, MAX_MAKE_RULES - found.make_rules.len()));
        }
        found.look(&dir, &text)?;
    }
    Ok(found.paths)
}

/// The strings of a JSON text, one a line; `None` when it is not JSON.
fn json_strings(text: &str) -> Option<String> {
    fn walk(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut out = String::new();
    walk(&value, &mut out);
    Some(out)
}

/// Whether `path` is a lockfile: versions and checksums, no scripts.
fn is_lockfile(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    [
        "package-lock.json",
        "npm-shrinkwrap.json",
        "pnpm-lock.yaml",
        "yarn.lock",
        "uv.lock",
        "poetry.lock",
        "Cargo.lock",
        "go.sum",
        "go.work.sum",
    ]
    .contains(&name)
}

/// Whether `path` is a pip requirement file, by the usual names
/// (`requirements*.txt`, `requirements/*.txt`).
fn is_requirements(path: &str) -> bool {
    let mut parts = path.rsplit('/');
    let name = parts.next().unwrap_or(path);
    let parent = parts.next();
    name.ends_with(".txt") && (name.contains("requirements") || parent == Some("requirements"))
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
mod tests;
