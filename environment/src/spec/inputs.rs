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

/// Directories a text names that its words are also looked up from, at
/// most.
const MAX_BASES: usize = 16;
/// Entries of one named directory whose files are read as scripts, at
/// most (the directory counts whole, as its tree).
const MAX_LISTED: usize = 256;
/// What Python loads instead of a source file, and the libraries a link
/// step finds in the working directory before the system's (`-lpthread`
/// links a `./libpthread.a`).
const COMPILED: &[&str] = &[".pyc", ".pyo", ".so", ".pyd", ".a"];
/// Entries of the tree walked to find compiled Python, at most: what a
/// shared checkout holds.
const MAX_WALKED: usize = 500_000;
/// Links followed while resolving one name, at most (the kernel's bound
/// is 40; a setup's paths need few).
const MAX_LINKS: usize = 8;

/// Where the sandbox holds the repository, and the setup's home.
const WORKSPACE: &str = "workspace";
const HOME: &str = "/home/agent";

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

/// The suffixes of the files make's built-in rules make a file from (GNU
/// make's suffix list, and `.sh` for `%: %.sh`).
const MAKE_SOURCES: &[&str] = &[
    ".sh", ".c", ".cc", ".cpp", ".C", ".o", ".s", ".S", ".f", ".F", ".r", ".p", ".y", ".l", ".ym",
    ".lm", ".mod", ".sym", ".def", ".w", ".ch", ".web", ".tex", ".texi", ".texinfo", ".txinfo",
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

struct Found<'f> {
    files: &'f dyn RepoFiles,
    paths: BTreeSet<String>,
    /// Files found and not read yet.
    queue: VecDeque<String>,
    /// Whether `make` runs: it remakes a file it is asked for (or
    /// includes) from a sibling by its built-in rules.
    make: bool,
    /// The pattern rules (target, prerequisite) of the Makefiles read.
    make_rules: Vec<(String, String)>,
    /// Every name resolved while make runs, and how many of the rules
    /// were applied to it already.
    named: Vec<(String, usize)>,
}

impl Found<'_> {
    /// Looks up the words of `text`, a file in `dir` (or the setup line).
    fn look(&mut self, dir: &str, text: &str) -> Result<(), FilesError> {
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
    fn add_named(&mut self, base: &str, word: &str) -> Result<(), FilesError> {
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
    fn add_make_sources(&mut self, path: &str) {
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
    fn apply_make_rules(&mut self) -> bool {
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
    fn add_module(&mut self, base: &str, word: &str) -> Result<(), FilesError> {
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
    fn add_entries(&mut self, dir: &str) -> Result<(), FilesError> {
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
    fn add_unread(&mut self, path: &str) {
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
    fn add_file(&mut self, path: &str) -> bool {
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
    fn resolve(&mut self, dir: &str, target: &str) -> Option<String> {
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

/// `word` with `/proc/<process>[/task/<thread>]/{cwd,root}` written as
/// `/proc/self/…`, when it has that shape.
fn proc_as_self(word: &str) -> Option<String> {
    let at = word.find("/proc/")?;
    let rest = &word[at + "/proc/".len()..];
    let parts: Vec<&str> = rest.split('/').collect();
    let skip = match parts.as_slice() {
        [_, "cwd" | "root", ..] => 1,
        [_, "task", _, "cwd" | "root", ..] => 3,
        _ => return None,
    };
    Some(format!(
        "{}/proc/self/{}",
        &word[..at],
        parts[skip..].join("/")
    ))
}

/// Pattern rules read from Makefiles, at most.
const MAX_MAKE_RULES: usize = 256;
/// Names make may be asked for that the rules are applied to, at most.
const MAX_NAMED: usize = 4096;

/// Whether `path` is a file make reads its rules from.
fn is_makefile(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    ["Makefile", "makefile", "GNUmakefile"].contains(&name) || name.ends_with(".mk")
}

/// The pattern rules of a Makefile's text, as (target, prerequisite)
/// pairs holding `%`: `%: %.in`, `tools/%: zz/%`, and a static pattern
/// rule's `tools/install: tools/%: zz/%.sh`. Assignments (`x := %`) and
/// recipes are not rules.
fn make_rules(text: &str, max: usize) -> Vec<(String, String)> {
    let mut rules = Vec::new();
    let joined = text.replace("\\\n", " ");
    for line in joined.lines() {
        if line.starts_with('\t') || rules.len() >= max {
            continue;
        }
        let line = line.split('#').next().unwrap_or(line);
        let parts: Vec<&str> = line.split(':').collect();
        let (targets, prerequisites) = match parts.as_slice() {
            [_, rest @ ..] if rest.first().is_some_and(|r| r.starts_with('=')) => continue,
            [targets, prerequisites] => (*targets, *prerequisites),
            [_, targets, prerequisites] => (*targets, *prerequisites),
            _ => continue,
        };
        let prerequisites = prerequisites.split(';').next().unwrap_or(prerequisites);
        for target in targets.split_whitespace().filter(|t| t.contains('%')) {
            for prerequisite in prerequisites
                .split_whitespace()
                .filter(|p| p.contains('%') && *p != "|")
            {
                if rules.len() < max {
                    rules.push((target.to_owned(), prerequisite.to_owned()));
                }
            }
        }
    }
    rules
}

/// The prerequisite `prerequisite` names for `path` when `path` matches
/// the target pattern `target`: a pattern without a slash matches the
/// file's name, and the directory is put back before the prerequisite,
/// as make does.
fn pattern_source(path: &str, target: &str, prerequisite: &str) -> Option<String> {
    let (dir, matched) = match target.contains('/') {
        true => ("", path),
        false => match path.rsplit_once('/') {
            Some((dir, name)) => (dir, name),
            None => ("", path),
        },
    };
    let (before, after) = target.split_once('%')?;
    let stem = matched.strip_prefix(before)?.strip_suffix(after)?;
    let source = prerequisite.replacen('%', stem, 1);
    Some(match dir {
        "" => source,
        dir => format!("{dir}/{source}"),
    })
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

/// The words of a shell text that could be paths in the repository, as
/// the shell splits them: quotes group (`"sp ace.sh"`), a backslash
/// escapes the next character (`sp\ ace.sh`), and `;&|<>()` and backquotes
/// separate. A quoted word is looked into too (`bash -c 'cd tools && sh
/// install.sh'`). A word `--opt=value` is looked at for its value. `~`,
/// `$HOME` and `${HOME}` at a word's start are the setup's home, `$PWD` and
/// `${PWD}` the directory it is in; an absolute path is also tried from
/// the repository (`$(pwd)/tools/x.sh` leaves `/tools/x.sh`). Other words
/// that expand (`$`, globs) are not guessed at.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut all = Vec::new();
    collect_words(text, 0, &mut all);
    all.into_iter()
}

/// How deep quoted words are looked into.
const MAX_QUOTING: usize = 3;

fn collect_words(text: &str, depth: usize, out: &mut Vec<String>) {
    for (word, expands) in split_words(text) {
        if depth < MAX_QUOTING
            && word.contains(|c: char| c.is_whitespace() || ";&|<>()`".contains(c))
        {
            collect_words(&word, depth + 1, out);
        }
        let word = match word.rsplit_once('=') {
            Some((_, value)) => value.to_owned(),
            None => word,
        };
        let word = [
            ("$HOME", HOME),
            ("${HOME}", HOME),
            ("$PWD", "."),
            ("${PWD}", "."),
        ]
        .iter()
        .find_map(|(variable, value)| {
            let rest = word.strip_prefix(variable)?;
            (rest.is_empty() || rest.starts_with('/')).then(|| format!("{value}{rest}"))
        })
        .unwrap_or(word);
        // Any process's view under `/proc` (`/proc/$$/cwd`, `/proc/$PPID/
        // cwd`, `/proc/self/task/$$/cwd`) is taken as the current one's:
        // which process is known only at run time.
        let word = proc_as_self(&word).unwrap_or(word);
        let unguessable = expands && word.contains(['$', '*', '?', '[', '{']);
        if word.is_empty() || unguessable {
            continue;
        }
        // A short option's value may be attached: `make -Ctools`,
        // `python3 -mtools.install`, `pip install -rreq.txt`.
        if let Some(option) = word.strip_prefix('-') {
            let mut chars = option.chars();
            if chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && !chars.as_str().is_empty() {
                out.push(chars.as_str().to_owned());
            }
            continue;
        }
        // pip's `name @ file:///workspace/pkg`, npm's `file:../pkg`.
        let word = match word.strip_prefix("file:") {
            Some(rest) => match rest.strip_prefix("//") {
                Some(path) => path.to_owned(),
                None => rest.to_owned(),
            },
            None => word,
        };
        if word.is_empty() {
            continue;
        }
        if let Some(relative) = word.strip_prefix('/') {
            let elsewhere = !relative.starts_with(WORKSPACE) && !word.starts_with(HOME);
            if elsewhere && !relative.is_empty() {
                out.push(relative.to_owned());
            }
        }
        out.push(word);
    }
}

/// Splits `text` into words, each with whether an unquoted (or
/// double-quoted) part of it could expand.
fn split_words(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut expands = false;
    let mut started = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    if next != '\n' {
                        word.push(next);
                    }
                }
                started = true;
            }
            '\'' => {
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
                started = true;
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = chars.next() {
                                word.push(next);
                            }
                        }
                        c => {
                            expands |= matches!(c, '$' | '`');
                            word.push(c);
                        }
                    }
                }
                started = true;
            }
            c if c.is_whitespace() || ";&|<>()`".contains(c) => {
                if started {
                    out.push((std::mem::take(&mut word), expands));
                }
                expands = false;
                started = false;
            }
            c => {
                expands |= matches!(c, '$' | '*' | '?' | '[' | '{');
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push((word, expands));
    }
    out
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
mod tests {
    use super::*;
    use crate::spec::testing::MapFiles;

    /// Each setup's inputs against what is expected, every mismatch shown.
    fn check(files: &MapFiles, cases: &[(&str, &[&str])]) {
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|(setup, expected)| {
                let found = inputs(files, Some(setup)).unwrap();
                (found != *expected)
                    .then(|| format!("{setup}\n  found    {found:?}\n  expected {expected:?}"))
            })
            .collect();
        assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    }

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
            [
                "env.sh",
                "setup.sh",
                "tools",
                "tools/fetch.py",
                "tools/install.sh"
            ]
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
            ["tools", "tools/fetch.sh", "tools/install.sh"]
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
                "web",
                "web/build.js",
                "web/package-lock.json"
            ],
            "a directory named is where later words are looked up, and its files are inputs"
        );
    }

    /// The third red-team round's bypasses (M1): names the sandbox
    /// resolves into the repository by an absolute path, `..`, `~`, a
    /// chain of `cd`s, a linked directory, or quoting; a directory or a
    /// module run as a program. Each case is the script a setup runs,
    /// which the key must cover.
    #[test]
    fn names_resolve_as_the_sandbox_resolves_them() {
        let files = MapFiles::new()
            .with("tools/install.sh", "echo\n")
            .with("tools/sub/install.sh", "echo\n")
            .with("tools/Makefile", "deps:\n")
            .link("lnk", "tools")
            .link("abs.sh", "/workspace/tools/install.sh")
            .with("sp ace.sh", "echo\n");
        let cases: &[(&str, &[&str])] = &[
            ("sh /workspace/tools/install.sh", &["tools/install.sh"]),
            (
                "cd /workspace/tools && sh install.sh",
                &["tools", "tools/Makefile", "tools/install.sh"],
            ),
            (
                "make -s -C /workspace/tools deps",
                &["tools", "tools/Makefile", "tools/install.sh"],
            ),
            ("sh abs.sh", &["abs.sh", "tools/install.sh"]),
            ("sh ../workspace/tools/install.sh", &["tools/install.sh"]),
            (
                "cd ../workspace/tools && sh install.sh",
                &["tools", "tools/Makefile", "tools/install.sh"],
            ),
            (
                "sh ~/../../workspace/tools/install.sh",
                &["tools/install.sh"],
            ),
            (
                "sh $HOME/../../workspace/tools/install.sh",
                &["tools/install.sh"],
            ),
            (
                "cd tools && cd sub && sh install.sh",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.sh",
                    "tools/sub",
                    "tools/sub/install.sh",
                ],
            ),
            (
                "cd tools/sub && cd .. && sh install.sh",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.sh",
                    "tools/sub",
                    "tools/sub/install.sh",
                ],
            ),
            ("sh lnk/install.sh", &["lnk", "tools/install.sh"]),
            (
                "cd lnk && sh install.sh",
                &["lnk", "tools", "tools/Makefile", "tools/install.sh"],
            ),
            (
                "sh lnk/../tools/sub/install.sh",
                &["lnk", "tools/sub/install.sh"],
            ),
            ("sh \"sp ace.sh\"", &["sp ace.sh"]),
            ("sh ./sp\\ ace.sh", &["sp ace.sh"]),
            ("sh 'sp ace.sh'", &["sp ace.sh"]),
            (
                "bash -c 'pushd tools >/dev/null && sh install.sh'",
                &["tools", "tools/Makefile", "tools/install.sh"],
            ),
            ("sh $PWD/tools/install.sh", &["tools/install.sh"]),
            ("sh \"$(pwd)/tools/install.sh\"", &["tools/install.sh"]),
        ];
        check(&files, cases);
    }

    #[test]
    fn a_directory_or_a_module_run_as_a_program_names_what_runs() {
        let files = MapFiles::new()
            .with("lib/index.js", "x\n")
            .with("lib/main/index.js", "x\n")
            .with(
                "lib/pkg/package.json",
                r#"{"name": "p", "main": "dist/start"}"#,
            )
            .with("lib/pkg/dist/start.js", "x\n")
            .with("tools/__main__.py", "x\n")
            .with("tools/install.py", "x\n")
            .with("rakefile", "namespace :deps\n")
            .with("Taskfile.dist.yml", "tasks:\n");
        let cases: &[(&str, &[&str])] = &[
            ("node lib", &["lib", "lib/index.js"]),
            ("node lib/main", &["lib/main", "lib/main/index.js"]),
            (
                "node lib/pkg",
                &["lib/pkg", "lib/pkg/dist/start.js", "lib/pkg/package.json"],
            ),
            ("python3 -m tools.install", &["tools/install.py"]),
            (
                "python3 -m tools",
                &["tools", "tools/__main__.py", "tools/install.py"],
            ),
            ("rake deps", &["rakefile"]),
            ("task deps", &["Taskfile.dist.yml"]),
        ];
        check(&files, cases);
    }

    /// The fourth red-team round's bypasses (F1): attached option
    /// values, a process's view of itself under `/proc`, local projects
    /// that requirement lines name, and the scripts package managers run
    /// from their own files.
    #[test]
    fn attached_options_proc_self_and_the_package_managers_files_name_scripts() {
        let files = MapFiles::new()
            .with("tools/install.sh", "echo\n")
            .with("tools/install.py", "x\n")
            .with("tools/Makefile", "deps:\n")
            .with("req-dev.txt", "flask\n")
            .link("cwd.sh", "/proc/self/cwd/tools/install.sh");
        let cases: &[(&str, &[&str])] = &[
            (
                "make -Ctools deps",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.py",
                    "tools/install.sh",
                ],
            ),
            ("python3 -mtools.install", &["tools/install.py"]),
            ("pip install -rreq-dev.txt", &["req-dev.txt"]),
            ("sh /proc/self/cwd/tools/install.sh", &["tools/install.sh"]),
            (
                "cd /proc/self/cwd/tools && sh install.sh",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.py",
                    "tools/install.sh",
                ],
            ),
            (
                "cd tools && sh /proc/self/cwd/install.sh",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.py",
                    "tools/install.sh",
                ],
            ),
            (
                "sh /proc/self/root/workspace/tools/install.sh",
                &["tools/install.sh"],
            ),
            ("sh /proc/1/cwd/tools/install.sh", &["tools/install.sh"]),
            ("sh cwd.sh", &["cwd.sh", "tools/install.sh"]),
            // Names made at run time from a directory the text names.
            (
                "ln -s tools l && sh l/install.sh",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.py",
                    "tools/install.sh",
                ],
            ),
            (
                "cp -r tools /tmp/t && sh /tmp/t/install.sh",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.py",
                    "tools/install.sh",
                ],
            ),
            (
                "run-parts tools",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.py",
                    "tools/install.sh",
                ],
            ),
            (
                "HOME=/workspace/tools; sh ~/install.sh",
                &[
                    "tools",
                    "tools/Makefile",
                    "tools/install.py",
                    "tools/install.sh",
                ],
            ),
        ];
        check(&files, cases);

        let files = MapFiles::new()
            .with(
                "requirements.txt",
                "-e ./localpkg\n./other\nlp @ file:///workspace/third\nflask==3\n",
            )
            .with("localpkg/setup.py", "x\n")
            .with("other/pyproject.toml", "[project]\n")
            .with("third/setup.cfg", "[metadata]\n")
            .with(
                "package.json",
                r#"{"scripts": {"postinstall": "node scripts/post.js", "test": "jest"}}"#,
            )
            .with("scripts/post.js", "x\n")
            .with(".yarnrc", "yarn-path \"./y.js\"\n")
            .with("y.js", "x\n")
            .with("package-lock.json", r#"{"x": "node not-a-script.js"}"#)
            .with("not-a-script.js", "x\n");
        assert_eq!(
            inputs(&files, Some("pip install -r requirements.txt && npm ci")).unwrap(),
            [
                ".yarnrc",
                "localpkg",
                "localpkg/setup.py",
                "other",
                "other/pyproject.toml",
                "package-lock.json",
                "package.json",
                "requirements.txt",
                "scripts/post.js",
                "third",
                "third/setup.cfg",
                "y.js"
            ]
        );
    }

    /// The fifth red-team round's bypasses: Python runs compiled files
    /// before their sources and looks a module up in several places; Node
    /// tries `lib.js` before `lib/`; a nested file of a copied directory;
    /// the shell's own `/proc/$$`.
    #[test]
    fn what_python_node_and_the_shell_would_run_instead_counts() {
        let files = MapFiles::new()
            .with("tools/install.py", "x\n")
            .with("tools/__init__.py", "x\n")
            .with("tools/__pycache__/install.cpython-311.pyc", "x")
            .with("tools/sub/install.sh", "echo\n")
            .with("tools.py", "x\n")
            .with("venv.pyc", "x")
            .with("lib.js", "x\n")
            .with("lib/index.js", "x\n")
            .with("pkg/mod/__init__.py", "x\n");
        let bytecode = ["tools/__pycache__/install.cpython-311.pyc", "venv.pyc"];
        let with_bytecode = |paths: &[&str]| {
            let mut all: Vec<String> = paths
                .iter()
                .chain(&bytecode)
                .map(|p| p.to_string())
                .collect();
            all.sort();
            all
        };
        let cases: &[(&str, Vec<String>)] = &[
            ("true", with_bytecode(&[])),
            ("python3 -m venv /home/agent/venv", with_bytecode(&[])),
            (
                "python3 -m tools.install",
                with_bytecode(&["tools.py", "tools/__init__.py", "tools/install.py"]),
            ),
            (
                "python3 -m tools",
                with_bytecode(&["tools", "tools.py", "tools/__init__.py", "tools/install.py"]),
            ),
            (
                "python3 -m pkg.mod",
                with_bytecode(&["pkg/mod", "pkg/mod/__init__.py"]),
            ),
            (
                "node lib",
                with_bytecode(&["lib", "lib.js", "lib/index.js"]),
            ),
            (
                "sh /proc/$$/cwd/tools/sub/install.sh",
                with_bytecode(&["tools/sub/install.sh"]),
            ),
            (
                "sh /proc/$PPID/cwd/tools/sub/install.sh",
                with_bytecode(&["tools/sub/install.sh"]),
            ),
            (
                "sh /proc/self/task/$$/cwd/tools/sub/install.sh",
                with_bytecode(&["tools/sub/install.sh"]),
            ),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|(setup, expected)| {
                let found = inputs(&files, Some(setup)).unwrap();
                (found != *expected)
                    .then(|| format!("{setup}\n  found    {found:?}\n  expected {expected:?}"))
            })
            .collect();
        assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    }

    /// The sixth red-team round: an extension module Python loads before
    /// the package's `__init__.py` (or before a module it imports), and a
    /// `.pyc` that is a link to a file of another name.
    #[test]
    fn extension_modules_and_linked_bytecode_count() {
        let files = MapFiles::new()
            .with("tools/install.py", "x\n")
            .with("tools/__init__.cpython-311-x86_64-linux-gnu.so", "ELF")
            .with("shutil.cpython-311-x86_64-linux-gnu.so", "ELF")
            .link(
                "tools/__pycache__/install.cpython-311.pyc",
                "../../data/blob.bin",
            )
            .with("data/blob.bin", "x");
        assert_eq!(
            inputs(&files, Some("true")).unwrap(),
            [
                "data/blob.bin",
                "shutil.cpython-311-x86_64-linux-gnu.so",
                "tools/__init__.cpython-311-x86_64-linux-gnu.so",
                "tools/__pycache__/install.cpython-311.pyc"
            ]
        );
    }

    /// The seventh and eighth red-team rounds: make remakes what it is
    /// asked for (or includes, or its own Makefile) from a sibling by its
    /// built-in rules or the Makefile's own (`%: %.in`), and links a
    /// `./libpthread.a` for `-lpthread`; Python runs a module `pkg.py`
    /// before a namespace package `pkg/`.
    #[test]
    fn makes_built_in_rules_and_modules_beside_namespace_packages_count() {
        let files = MapFiles::new()
            .with(
                "Makefile",
                "-include local.mk\ndeps: tools/install\n\t./tools/install\n",
            )
            .with("Makefile.sh", "x")
            .with("local.mk.sh", "x")
            .with("tools/install", "x")
            .with("tools/install.sh", "x")
            .with("tools/install.c", "x")
            .with("RCS/Makefile,v", "x")
            .with("tools/install.in", "x")
            .with("libpthread.a", "x")
            .with("pkg.py", "x")
            .with("pkg/sub.py", "x")
            .with("pkg/sub/install.py", "x");
        check(
            &files,
            &[
                (
                    "make -s deps",
                    &[
                        "Makefile",
                        "Makefile.sh",
                        "RCS/Makefile,v",
                        "libpthread.a",
                        "local.mk.sh",
                        "tools/install",
                        "tools/install.c",
                        "tools/install.in",
                        "tools/install.sh",
                    ],
                ),
                (
                    "python3 -m pkg.sub.install",
                    &["libpthread.a", "pkg.py", "pkg/sub.py", "pkg/sub/install.py"],
                ),
            ],
        );
    }

    /// The ninth red-team round: a Makefile's own pattern rules of any
    /// shape make a named file from a source the key did not count.
    #[test]
    fn a_makefiles_own_pattern_rules_of_any_shape_count() {
        let makefile = "%: %-tmpl\n%: tmpl.%\ntools/%: zz/%\n\
                        tools/install: tools/%: yy/%.sh\nX := %.c\ndeps: tools/install\n\t./tools/install\n";
        let files = MapFiles::new()
            .with("Makefile", makefile)
            .with("tools/install-tmpl", "x")
            .with("tools/tmpl.install", "x")
            .with("zz/install", "x")
            .with("yy/install.sh", "x")
            .with("install.c", "x");
        check(
            &files,
            &[(
                "make -s deps",
                &[
                    "Makefile",
                    "tools/install-tmpl",
                    "tools/tmpl.install",
                    "yy/install.sh",
                    "zz/install",
                ],
            )],
        );
        assert_eq!(
            make_rules("a := %\nb::=x\n%.o: %.c | dir\n\t%: not a rule\n", 10),
            [("%.o".to_owned(), "%.c".to_owned())]
        );
    }

    #[test]
    fn words_are_split_as_the_shell_splits_them() {
        let text =
            "a\\ b 'c d' \"e f\" --x=g.txt ~/h $HOME/i ${HOME} $X/j *.k \"$Y\" '$z' $PWD/l /m/n";
        let words: Vec<String> = words(text).collect();
        // A word that holds a space is looked into too: it may be a
        // command (`bash -c '…'`).
        assert_eq!(
            words,
            [
                "a",
                "b",
                "a b",
                "c",
                "d",
                "c d",
                "e",
                "f",
                "e f",
                "g.txt",
                "~/h",
                "/home/agent/i",
                "/home/agent",
                "$z",
                "./l",
                "m/n",
                "/m/n"
            ]
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
