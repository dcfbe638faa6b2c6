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
//! bounded number of files.

use std::collections::{BTreeSet, VecDeque};

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
/// Scripts read to follow what they run, at most.
const MAX_SCRIPTS: usize = 32;
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
/// [`MAX_SCRIPTS`] files read. A word is looked up from the root, from
/// the naming file's directory, and from each directory the same text
/// names (`cd tools && sh install.sh`, `make -C web`), whose lockfiles
/// and manifests are inputs too; a link is an input and so is what it
/// points to; `make` names its Makefile (and `just`, `task`, `rake`,
/// `tox`, `nox`, `invoke` theirs); `node lib/main` names `lib/main.js`.
/// Listing a file that is not run costs a rebuild when it changes;
/// missing one that is run would reuse an environment that no longer
/// matches its base. What a script reads without naming it (an import, a
/// glob, a variable) is not followed: docs/environments.md says so.
fn scripts(files: &dyn RepoFiles, setup: &str) -> Result<BTreeSet<String>, FilesError> {
    let mut found = Found {
        files,
        paths: BTreeSet::new(),
        queue: VecDeque::new(),
    };
    found.look("", setup);
    let mut read = 0;
    while let Some(path) = found.queue.pop_front() {
        if read == MAX_SCRIPTS {
            break;
        }
        // Requirement files are followed by their own grammar, below.
        if is_requirements(&path) {
            continue;
        }
        let Some(text) = read_text(files, &path)? else {
            continue;
        };
        read += 1;
        let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir).to_owned();
        found.look(&dir, &text);
    }
    Ok(found.paths)
}

/// Directories a text names that its words are also looked up from, at
/// most.
const MAX_BASES: usize = 16;
/// Links followed from one name, at most.
const MAX_LINKS: usize = 8;

/// What a program reads without being told: `make` its Makefile.
const IMPLICIT: &[(&str, &[&str])] = &[
    ("make", &["Makefile", "makefile", "GNUmakefile"]),
    ("just", &["justfile", "Justfile", ".justfile"]),
    ("task", &["Taskfile.yml", "Taskfile.yaml"]),
    ("rake", &["Rakefile"]),
    ("tox", &["tox.ini"]),
    ("nox", &["noxfile.py"]),
    ("invoke", &["tasks.py"]),
    ("inv", &["tasks.py"]),
];

/// Extensions tried for a name that is not a file (`node lib/main`).
const EXTENSIONS: &[&str] = &[".js", ".mjs", ".cjs", ".ts", ".py", ".sh"];

struct Found<'f> {
    files: &'f dyn RepoFiles,
    paths: BTreeSet<String>,
    /// Files found and not read yet.
    queue: VecDeque<String>,
}

impl Found<'_> {
    /// Looks up the words of `text`, a file in `dir` (or the setup line).
    fn look(&mut self, dir: &str, text: &str) {
        let words: Vec<&str> = words(text).take(MAX_MENTIONED).collect();
        let mut bases: Vec<String> = vec![String::new()];
        if !dir.is_empty() {
            bases.push(dir.to_owned());
        }
        for word in &words {
            for base in [String::new(), dir.to_owned()] {
                let Some(path) = normalize(&base, word) else {
                    continue;
                };
                if bases.len() < MAX_BASES && !bases.contains(&path) && self.files.is_dir(&path) {
                    bases.push(path);
                }
            }
        }
        for base in &bases {
            if !base.is_empty() {
                for known in KNOWN {
                    self.add(&format!("{base}/{known}"));
                }
            }
        }
        for word in &words {
            for base in &bases {
                if let Some((_, names)) = IMPLICIT.iter().find(|(program, _)| program == word) {
                    for name in *names {
                        self.add(&normalize(base, name).unwrap_or_default());
                    }
                }
                let Some(path) = normalize(base, word) else {
                    continue;
                };
                if !self.add(&path) && !path.contains('.') {
                    for extension in EXTENSIONS {
                        self.add(&format!("{path}{extension}"));
                    }
                }
            }
        }
    }

    /// Adds `path` when it is a file or a link (and what the link points
    /// to); whether it was either.
    fn add(&mut self, path: &str) -> bool {
        let mut path = path.to_owned();
        for _ in 0..MAX_LINKS {
            if self.paths.contains(&path) {
                return true;
            }
            if self.files.exists(&path) {
                self.paths.insert(path.clone());
                self.queue.push_back(path);
                return true;
            }
            let Some(target) = self.files.link(&path) else {
                return false;
            };
            self.paths.insert(path.clone());
            let dir = path.rsplit_once('/').map_or("", |(dir, _)| dir);
            // A link out of the repository names nothing in it.
            match normalize(dir, &target) {
                Some(next) => path = next,
                None => return true,
            }
        }
        true
    }
}

/// The words of a shell text that could be paths in the repository. A
/// word `--opt=value` is looked at for its value. Words that expand (`$`,
/// globs, `~`) are not guessed at.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || ";&|<>()`".contains(c))
        .map(|word| word.rsplit('=').next().unwrap_or(word))
        .map(|word| word.trim_matches(|c| c == '\'' || c == '"'))
        .filter(|word| {
            !word.is_empty()
                && !word.starts_with('-')
                && !word.contains(['$', '*', '?', '[', '{', '~'])
        })
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
mod tests {
    use super::*;
    use crate::spec::testing::MapFiles;

    #[test]
    fn known_files_present_are_inputs_whatever_the_setup() {
        let files = MapFiles::new()
            .with("package-lock.json", "{}")
            .with("Cargo.lock", "")
            .with("README.md", "")
            .with("src/package-lock.json", "{}");
        assert_eq!(
            inputs(&files, None).unwrap(),
            ["Cargo.lock", "package-lock.json"]
        );
        assert_eq!(
            inputs(&files, Some("make deps")).unwrap(),
            ["Cargo.lock", "package-lock.json"]
        );
    }

    #[test]
    fn files_the_setup_names_are_inputs() {
        let files = MapFiles::new()
            .with("scripts/setup.sh", "#!/bin/sh")
            .with("requirements-dev.txt", "-r requirements/base.txt\n")
            .with("requirements/base.txt", "-c ../constraints.txt\nflask\n")
            .with("constraints.txt", "flask==3.0\n")
            .with("tools.lock", "x");
        let setup = "./scripts/setup.sh && pip install -r requirements-dev.txt --constraint='tools.lock' missing.txt $HOME/x";
        assert_eq!(
            inputs(&files, Some(setup)).unwrap(),
            [
                "constraints.txt",
                "requirements-dev.txt",
                "requirements/base.txt",
                "scripts/setup.sh",
                "tools.lock"
            ]
        );
    }

    /// A setup script runs others: what they are is part of the
    /// environment too (red-team finding F2: a harmless `setup.sh` calling
    /// a `tools/install.sh` that differed between branches kept one key).
    #[test]
    fn files_the_setups_scripts_name_are_inputs() {
        let files = MapFiles::new()
            .with(
                "setup.sh",
                "#!/bin/sh
set -e
sh tools/install.sh
. ./env.sh
",
            )
            .with(
                "tools/install.sh",
                "cd tools && ./fetch.py --into ../vendor
",
            )
            .with(
                "tools/fetch.py",
                "print('x')
",
            )
            .with(
                "env.sh",
                "export A=1
",
            )
            .with(
                "unrelated.sh",
                "x
",
            );
        assert_eq!(
            inputs(&files, Some("sh ./setup.sh")).unwrap(),
            ["env.sh", "setup.sh", "tools/fetch.py", "tools/install.sh"]
        );
    }

    /// The second red-team round's bypasses of the above (N1): a script
    /// named after `cd`, a script that is a link, and `make`'s Makefile.
    #[test]
    fn scripts_named_after_cd_through_links_and_by_make_are_inputs() {
        let files = MapFiles::new()
            .with("tools/install.sh", "sh ./fetch.sh\n")
            .with("tools/fetch.sh", "echo\n")
            .link("setup.sh", "tools/install.sh")
            .with("Makefile", "deps:\n\tsh scripts/deps.sh\n")
            .with("scripts/deps.sh", "echo\n")
            .with("web/package-lock.json", "{}")
            .with("web/build.js", "x\n")
            .with("lib/main.js", "x\n");
        assert_eq!(
            inputs(&files, Some("cd tools && sh install.sh")).unwrap(),
            ["tools/fetch.sh", "tools/install.sh"]
        );
        assert_eq!(
            inputs(&files, Some("sh ./setup.sh")).unwrap(),
            ["setup.sh", "tools/fetch.sh", "tools/install.sh"]
        );
        assert_eq!(
            inputs(&files, Some("make deps")).unwrap(),
            ["Makefile", "scripts/deps.sh"]
        );
        assert_eq!(
            inputs(&files, Some("make -C web && node lib/main")).unwrap(),
            [
                "Makefile",
                "lib/main.js",
                "scripts/deps.sh",
                "web/package-lock.json"
            ],
            "a directory named is where later words are looked up, and its lockfiles are inputs"
        );
    }

    #[test]
    fn a_link_loop_or_a_link_out_of_the_tree_ends() {
        let files = MapFiles::new()
            .link("a.sh", "b.sh")
            .link("b.sh", "a.sh")
            .link("out.sh", "../../etc/passwd")
            .link("abs.sh", "/etc/passwd");
        assert_eq!(
            inputs(&files, Some("sh a.sh && sh out.sh && sh abs.sh")).unwrap(),
            ["a.sh", "abs.sh", "b.sh", "out.sh"]
        );
    }

    #[test]
    fn scripts_are_followed_within_a_bound() {
        let mut files = MapFiles::new();
        for i in 0..200 {
            files = files.with(&format!("s{i}.sh"), &format!("sh s{}.sh\n", i + 1));
        }
        let found = inputs(&files, Some("sh s0.sh")).unwrap();
        assert!(
            found.len() > 10 && found.len() <= MAX_SCRIPTS + 1,
            "{}",
            found.len()
        );
    }

    #[test]
    fn includes_are_followed_within_the_repository_and_a_bound() {
        let mut files = MapFiles::new().with(
            "requirements.txt",
            "-r /etc/passwd\n-r ../../outside.txt\n-r https://x.invalid/r.txt\n-r chain0.txt\n",
        );
        for i in 0..100 {
            files = files.with(
                &format!("chain{i}.txt"),
                &format!("--requirement=chain{}.txt # next\n", i + 1),
            );
        }
        let closure = requirement_closure(&files, vec!["requirements.txt".into()]).unwrap();
        assert_eq!(closure.len(), MAX_REQUIREMENT_FILES);
        assert_eq!(closure[1].0, "chain0.txt");
        assert!(closure
            .iter()
            .all(|(path, _)| !path.contains("..") && !path.starts_with('/')));
    }

    #[test]
    fn normalize_stays_inside() {
        assert_eq!(normalize("a/b", "../c.txt").as_deref(), Some("a/c.txt"));
        assert_eq!(normalize("", "./x/./y").as_deref(), Some("x/y"));
        assert_eq!(normalize("a", "../../x"), None);
        assert_eq!(normalize("", "."), None);
        assert_eq!(normalize("", "/x"), None);
    }
}
