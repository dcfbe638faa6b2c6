//! Looking a setup's names up in the base commit as the sandbox would
//! resolve them, and adding what each would run.

use std::collections::{BTreeSet, VecDeque};

use super::make::{pattern_source, MAKE_SOURCES, MAX_NAMED};
use super::words::words;
use super::{read_text, FilesError, RepoFiles, KNOWN, MAX_MENTIONED};

/// Directories a text names that its words are also looked up from, at
/// most.
const MAX_BASES: usize = 16;
/// Entries of one named directory whose files are read as scripts, at
/// most (the directory counts whole, as its tree).
const MAX_LISTED: usize = 256;
/// What Python loads instead of a source file, and the libraries a link
/// step finds in the working directory before the system's (`-lpthread`
/// links a `./libpthread.a`).
pub(super) const COMPILED: &[&str] = &[".pyc", ".pyo", ".so", ".pyd", ".a"];
/// Entries of the tree walked to find compiled Python, at most: what a
/// shared checkout holds.
pub(super) const MAX_WALKED: usize = 500_000;
/// Links followed while resolving one name, at most (the kernel's bound
/// is 40; a setup's paths need few).
const MAX_LINKS: usize = 8;

/// Where the sandbox holds the repository, and the setup's home.
pub(super) const WORKSPACE: &str = "workspace";
pub(super) const HOME: &str = "/home/agent";

/// What a program reads without being told: `make` its Makefile.
const IMPLICIT: &[(&str, &[&str])] = &[
    ("make", &["Makefile", "makefile", "GNUmakefile"]),
    ("just", &["justfile", "Justfile", ".justfile"]),
    (
        "task",
        &[
            "Taskfile.yml",
            "taskfile.yml",
            "Taskfile.yaml",
            "taskfile.yaml",
            "Taskfile.dist.yml",
            "taskfile.dist.yml",
            "Taskfile.dist.yaml",
            "taskfile.dist.yaml",
        ],
    ),
    (
        "rake",
        &["Rakefile", "rakefile", "Rakefile.rb", "rakefile.rb"],
    ),
    ("tox", &["tox.ini"]),
    ("nox", &["noxfile.py"]),
    ("invoke", &["tasks.py"]),
    ("inv", &["tasks.py"]),
];

/// Extensions tried for a name that is not a file (`node lib/main`).
const EXTENSIONS: &[&str] = &[".js", ".mjs", ".cjs", ".ts", ".py", ".sh"];

/// What runs when a directory is named as a program (`node lib`,
/// `python3 -m tools`, `python3 tools`).
const DIRECTORY_ENTRIES: &[&str] = &[
    "index.js",
    "index.mjs",
    "index.cjs",
    "index.ts",
    "package.json",
    "__main__.py",
    "__init__.py",
];

pub(super) struct Found<'f> {
    pub(super) files: &'f dyn RepoFiles,
    pub(super) paths: BTreeSet<String>,
    /// Files found and not read yet.
    pub(super) queue: VecDeque<String>,
    /// Whether `make` runs: it remakes a file it is asked for (or
    /// includes) from a sibling by its built-in rules.
    pub(super) make: bool,
    /// The pattern rules (target, prerequisite) of the Makefiles read.
    pub(super) make_rules: Vec<(String, String)>,
    /// Every name resolved while make runs, and how many of the rules
    /// were applied to it already.
    pub(super) named: Vec<(String, usize)>,
}

impl Found<'_> {
    /// Looks up the words of `text`, a file in `dir` (or the setup line).
    pub(super) fn look(&mut self, dir: &str, text: &str) -> Result<(), FilesError> {
        let words: Vec<String> = words(text).take(MAX_MENTIONED).collect();
        self.make |= words.iter().any(|w| {
            let program = w.rsplit('/').next().unwrap_or(w);
            program == "make" || program == "gmake"
        });
        let mut bases: Vec<String> = vec![String::new()];
        if !dir.is_empty() {
            bases.push(dir.to_owned());
        }
        // Every directory a word names from a base already known is a base
        // too, in the text's order: a `cd` chain is followed, and `cd -` or
        // a subshell's return lands on a base already there.
        for word in &words {
            let mut at = 0;
            while at < bases.len() && bases.len() < MAX_BASES {
                if let Some(path) = self.resolve(&bases[at], word) {
                    if !bases.contains(&path) && self.files.is_dir(&path) {
                        bases.push(path);
                    }
                }
                at += 1;
            }
        }
        // A directory the text names may be run from, copied, linked to
        // or run whole (`cp -r tools /tmp/t && sh /tmp/t/x.sh`, `run-parts
        // tools`, `HOME=/workspace/tools`): the files directly in it are
        // inputs. The root's are not: every setup is run from there.
        for base in bases.iter().filter(|base| !base.is_empty()) {
            for known in KNOWN {
                self.add_file(&format!("{base}/{known}"));
            }
        }
        let named = if dir.is_empty() { 1 } else { 2 };
        for base in bases.iter().skip(named) {
            // The whole directory, nested files too (`cp -r tools /tmp/t
            // && sh /tmp/t/sub/x.sh`), counts as its tree.
            self.paths.insert(base.clone());
            for name in self.files.list(base, MAX_LISTED) {
                self.add_file(&format!("{base}/{name}"));
            }
        }
        for word in &words {
            for base in &bases {
                if let Some((_, names)) = IMPLICIT
                    .iter()
                    .find(|(program, _)| *program == word.as_str())
                {
                    for name in *names {
                        if let Some(path) = self.resolve(base, name) {
                            if self.make {
                                self.add_make_sources(&path);
                            }
                            self.add_file(&path);
                        }
                    }
                }
                self.add_named(base, word)?;
            }
        }
        Ok(())
    }

    /// Adds what `word`, read from `base`, names: a file; a directory's
    /// entry points; a name without its extension; a dotted module.
    pub(super) fn add_named(&mut self, base: &str, word: &str) -> Result<(), FilesError> {
        let Some(path) = self.resolve(base, word) else {
            return Ok(());
        };
        if self.make && !path.is_empty() {
            self.add_make_sources(&path);
            if self.named.len() < MAX_NAMED && !self.named.iter().any(|(p, _)| *p == path) {
                self.named.push((path.clone(), 0));
            }
        }
        if self.add_file(&path) || path.is_empty() {
            return Ok(());
        }
        // Node tries `lib.js` before the directory `lib`, Python a module
        // `tools.py` beside a package `tools/`: every candidate counts.
        if !path.rsplit('/').next().unwrap_or(&path).contains('.') {
            for extension in EXTENSIONS {
                if let Some(with) = self.resolve(base, &format!("{word}{extension}")) {
                    self.add_file(&with);
                }
            }
        }
        if self.files.is_dir(&path) {
            self.add_entries(&path)?;
        }
        if !word.contains('/') && is_dotted_module(word) {
            self.add_module(base, word)?;
        }
        Ok(())
    }

    /// The files make's rules would remake `path` from (`tools/install`
    /// from `tools/install.sh` or `.c`, or from `tools/install.in` by a
    /// Makefile's `%: %.in`; a missing `local.mk` from `local.mk.sh`; the
    /// Makefile itself from `Makefile.sh`), and its RCS and SCCS masters.
    pub(super) fn add_make_sources(&mut self, path: &str) {
        let (dir, name) = match path.rsplit_once('/') {
            Some((dir, name)) => (format!("{dir}/"), name),
            None => (String::new(), path),
        };
        let mut candidates: Vec<String> = MAKE_SOURCES
            .iter()
            .map(|suffix| format!("{path}{suffix}"))
            .collect();
        candidates.push(format!("{path},v"));
        candidates.push(format!("{dir}RCS/{name},v"));
        candidates.push(format!("{dir}RCS/{name}"));
        candidates.push(format!("{dir}SCCS/s.{name}"));
        if let Some(stem) = name.strip_suffix(".o") {
            for suffix in MAKE_SOURCES {
                candidates.push(format!("{dir}{stem}{suffix}"));
            }
        }
        // A Makefile's own pattern rules (`%: %.in`) make `x` from any
        // `x.<suffix>` beside it: every such sibling counts.
        let prefix = format!("{name}.");
        for sibling in self.files.list(dir.trim_end_matches('/'), MAX_LISTED) {
            if sibling.starts_with(&prefix) {
                candidates.push(format!("{dir}{sibling}"));
            }
        }
        for candidate in candidates {
            self.add_file(&candidate);
        }
    }

    /// Applies the Makefiles' pattern rules not yet applied to each name
    /// make may be asked for: `tools/install` with `%: %-tmpl` names
    /// `tools/install-tmpl`, with `tools/%: zz/%` names `zz/install`.
    /// Whether anything new was queued.
    pub(super) fn apply_make_rules(&mut self) -> bool {
        let before = self.queue.len();
        let rules = self.make_rules.clone();
        let mut named = std::mem::take(&mut self.named);
        for (path, applied) in &mut named {
            for (target, prerequisite) in &rules[*applied..] {
                if let Some(source) = pattern_source(path, target, prerequisite) {
                    self.add_file(&source);
                }
            }
            *applied = rules.len();
        }
        self.named = named;
        self.queue.len() > before
    }

    /// What `python3 -m a.b` may run: each package's `__init__.py` on the
    /// way (`a/__init__.py`), the module `a/b.py`, or the package `a/b/`
    /// with its `__init__.py` and `__main__.py`.
    pub(super) fn add_module(&mut self, base: &str, word: &str) -> Result<(), FilesError> {
        let parts: Vec<&str> = word.split('.').collect();
        for end in 1..parts.len() {
            let package = parts[..end].join("/");
            // A module `a.py` wins over a namespace package `a/`, and can
            // set its own `__path__`: each level's module counts too.
            for candidate in [format!("{package}/__init__.py"), format!("{package}.py")] {
                if let Some(path) = self.resolve(base, &candidate) {
                    self.add_file(&path);
                }
            }
        }
        let module = parts.join("/");
        if let Some(file) = self.resolve(base, &format!("{module}.py")) {
            self.add_file(&file);
        }
        if let Some(dir) = self.resolve(base, &module) {
            if self.files.is_dir(&dir) {
                self.add_entries(&dir)?;
            }
        }
        Ok(())
    }

    /// The files that run when the directory `dir` is named as a program,
    /// and the `main` its `package.json` names.
    pub(super) fn add_entries(&mut self, dir: &str) -> Result<(), FilesError> {
        // What runs may load anything beside it: the directory counts
        // whole, as its tree.
        self.paths.insert(dir.to_owned());
        for entry in DIRECTORY_ENTRIES {
            if let Some(path) = self.resolve(dir, entry) {
                self.add_file(&path);
            }
        }
        let Some(manifest) = self.resolve(dir, "package.json") else {
            return Ok(());
        };
        let Some(text) = read_text(self.files, &manifest)? else {
            return Ok(());
        };
        let main = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("main")?.as_str().map(str::to_owned));
        if let Some(main) = main {
            let manifest_dir = manifest.rsplit_once('/').map_or("", |(dir, _)| dir);
            if let Some(path) = self.resolve(manifest_dir, &main) {
                if !self.add_file(&path) {
                    for extension in EXTENSIONS {
                        self.add_file(&format!("{path}{extension}"));
                    }
                    if self.files.is_dir(&path) {
                        for entry in &DIRECTORY_ENTRIES[..4] {
                            self.add_file(&format!("{path}/{entry}"));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Adds `path` (a file, or a link and what it points to) without
    /// reading it as a script.
    pub(super) fn add_unread(&mut self, path: &str) {
        if let Some(target) = self.resolve("", path) {
            if self.files.exists(&target) {
                self.paths.insert(target);
            }
        }
        if self.files.exists(path) {
            self.paths.insert(path.to_owned());
        }
    }

    /// Adds `path` when it is a regular file; whether it is one.
    pub(super) fn add_file(&mut self, path: &str) -> bool {
        if path.is_empty() {
            return false;
        }
        if self.paths.contains(path) {
            return self.files.exists(path);
        }
        if self.files.exists(path) {
            self.paths.insert(path.to_owned());
            self.queue.push_back(path.to_owned());
            return true;
        }
        false
    }

    /// `target`, named in the repository's directory `dir`, as the
    /// sandbox resolves it: the path inside the repository it reaches
    /// (`""` for the repository itself), or `None` when it leaves the
    /// repository or cannot be told (a URL, a loop of links). The
    /// repository is `/workspace` and the setup's home `/home/agent`
    /// (`~`); `..` and links are taken component by component, as the
    /// kernel walks a path, so `lnk/../x` and `/workspace/lnk/x` land
    /// where they would. Each link passed through is an input: its target
    /// is part of what runs.
    pub(super) fn resolve(&mut self, dir: &str, target: &str) -> Option<String> {
        if target.is_empty() || target.contains("://") || target.contains('\\') {
            return None;
        }
        let target = match target.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("{HOME}{rest}"),
            _ => target.to_owned(),
        };
        // Where the name is read from: `/proc/self/cwd` is this too.
        let cwd: Vec<String> = std::iter::once(WORKSPACE)
            .chain(dir.split('/').filter(|p| !p.is_empty()))
            .map(str::to_owned)
            .collect();
        let mut done: Vec<String> = Vec::new();
        if !target.starts_with('/') {
            done.clone_from(&cwd);
        }
        let mut pending: VecDeque<String> = target
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .map(str::to_owned)
            .collect();
        let mut links = 0;
        while let Some(part) = pending.pop_front() {
            if part == "." {
                continue;
            }
            if part == ".." {
                done.pop();
                continue;
            }
            done.push(part);
            // A process's view of itself: `/proc/self/cwd` is the
            // directory it runs in, `/proc/self/root` the root.
            if let [proc, process, which] = done.as_slice() {
                let process = process == "self"
                    || process == "thread-self"
                    || process.chars().all(|c| c.is_ascii_digit());
                if proc == "proc" && process {
                    match which.as_str() {
                        "cwd" => done.clone_from(&cwd),
                        "root" => done.clear(),
                        _ => {}
                    }
                    continue;
                }
            }
            let Some(inside) = inside_repository(&done) else {
                continue;
            };
            let Some(link) = self.files.link(&inside) else {
                continue;
            };
            self.paths.insert(inside);
            links += 1;
            if links > MAX_LINKS {
                return None;
            }
            done.pop();
            if link.starts_with('/') {
                done.clear();
            }
            for part in link.split('/').rev().filter(|p| !p.is_empty()) {
                pending.push_front(part.to_owned());
            }
        }
        inside_repository(&done)
    }
}

/// The path inside the repository of the absolute path `parts`, when it
/// is under `/workspace`.
fn inside_repository(parts: &[String]) -> Option<String> {
    (parts.first()? == WORKSPACE).then(|| parts[1..].join("/"))
}

/// `tools.install`: a Python module's dotted name (`python3 -m`).
fn is_dotted_module(word: &str) -> bool {
    word.contains('.')
        && word.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}
