//! What a change touches, path by path: ordinary work, or held for a
//! maintainer. Decided from the commit's diff (each changed path once,
//! with its modes), not from the tree, and by an allow-list: what the
//! gate knows to be ordinary ([`known`]) is ordinary, and everything else
//! (an unknown extension, an extension-less file, a dot-file or a
//! dot-directory, configuration formats, a link, a mode change) is held.
//! A list of what is dangerous would need a row for every tool in the
//! world; this one fails closed. The tampering catalogue stays as the
//! explanation shown beside a held path that it names.
//!
//! A repository's maintainers widen or narrow it in their base branch's
//! `.forgehand.toml` (`[gate] ordinary = […]`, `held = […]`, see
//! [`repository`]); the agent's own edit of that file is always held.

pub mod changes;
pub mod imports;
pub mod known;
pub mod manifest;
pub mod markup;
pub mod names;
pub mod policy;
pub mod repository;

use std::fmt;

use crate::integrity::{rule_for, Rule};
use known::{
    name_matches, AGENT_INSTRUCTIONS, BUILD_DIRS, CHANGELOG_DIRS, DOC_EXTENSIONS, DOC_NAMES,
    ENTRY_POINTS, LOCKFILES, MANIFESTS, SOURCE_EXTENSIONS, TEST_DATA_EXTENSIONS, TEST_DIRS,
};
use names::{is_short_name, FoldedPath};
pub use repository::{RepoRules, RepoRulesError};

/// One changed path of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    /// As the tree names it.
    pub path: String,
    pub status: Status,
    /// Git's modes (0o100644, 0o100755, 0o120000, 0o160000); `None` on
    /// the side where the path does not exist.
    pub old_mode: Option<u32>,
    pub new_mode: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Added,
    Modified,
    Deleted,
}

/// The two versions of a changed file, for the kinds judged by content
/// (manifests); `None` where the file is not (or is larger than the gate
/// reads). And what the base tree held.
pub trait Contents {
    fn before(&self, path: &str) -> Option<Vec<u8>>;
    fn after(&self, path: &str) -> Option<Vec<u8>>;
    /// Whether the base tree's directory `dir` (`""`: the root, as the
    /// change names it) holds a file whose name ends with `.ext`.
    fn had_kind(&self, dir: &str, ext: &str) -> bool;
    /// Whether a file of the base tree that instructs agents imports
    /// `path` (`@docs/guide.md` in `CLAUDE.md`): an agent reads it as
    /// instructions too.
    fn imported_by_agents(&self, path: &str) -> bool;
    /// Whether the base tree's directory `dir` (`""`: the root) holds a
    /// known manifest (`Cargo.toml`, `package.json`, …): a project's root,
    /// where its test directory is its test runner's. Not known: not one.
    fn is_project_root(&self, _dir: &str) -> bool {
        false
    }
    /// Whether the base tree's directory `dir`, at any depth, already
    /// holds a file of kind `ext` that a documentation builder would run
    /// (Markdown that is not plain): a corpus of them, a formatter's
    /// fixtures. Not known: no.
    fn had_code_kind(&self, _dir: &str, _ext: &str) -> bool {
        false
    }
}

/// Why a path is ordinary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ordinary {
    Source,
    Documentation,
    TestData,
    ChangelogFragment,
    /// A manifest whose changed keys only describe.
    Describing,
    /// The repository's `[gate] ordinary` names it.
    Repository(String),
}

/// Why a path is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Link,
    Submodule,
    /// A mode changed (an executable bit set or cleared).
    Mode {
        from: u32,
        to: u32,
    },
    /// A new file made executable.
    NewExecutable,
    /// A name of the form Windows gives short names (`CLAUDE~1`).
    ShortName,
    /// A file the catalogue names: a tool runs or reads it.
    Catalogued,
    /// A new source file where the base tree has none of its kind (a new
    /// directory, or the first of its language in one): tools look for
    /// entry points by name there.
    NewKind,
    /// Markdown under an upper-case name, the convention of files tools
    /// and agents read (`WARP.md`, `CRUSH.md`).
    UpperCaseDocument,
    /// Imported by a file that instructs agents.
    ImportedByAgents,
    /// Documentation adding, at this line, what a documentation builder
    /// runs or reads as code (MDX, a script element, a directive).
    RunsAsCode(usize),
    /// This bot's own settings in the repository.
    ForgehandToml,
    /// A git control file (`.gitattributes`, `.gitmodules`).
    GitControl,
    /// A dot-file or a file in a dot-directory: configuration tools find
    /// by name.
    DotPath,
    AgentInstructions,
    /// A file of a known kind that a tool runs or reads as code.
    EntryPoint(&'static str),
    /// A manifest whose changed keys do more than describe (or that no
    /// longer parses, or is new).
    Manifest(Vec<String>),
    /// A new manifest: a new package.
    NewManifest,
    /// A lockfile: what the project installs.
    Lockfile,
    /// Of a kind the gate does not know to be ordinary.
    Unknown(Option<String>),
    /// The repository's `[gate] held` names it.
    Repository(String),
}

/// The verdict on one path, with the catalogue row that explains it when
/// there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ordinary(Ordinary),
    Held {
        why: Held,
        explained: Option<&'static Rule>,
    },
}

impl Verdict {
    pub fn is_held(&self) -> bool {
        matches!(self, Verdict::Held { .. })
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Held::Link => f.write_str("a symlink"),
            Held::Submodule => f.write_str("a submodule"),
            Held::Mode { from, to } => write!(f, "its mode changed from {from:o} to {to:o}"),
            Held::NewExecutable => f.write_str("a new file made executable"),
            Held::ShortName => f.write_str(
                "a name of the form Windows gives short names (`NAME~1`), which may open another file there",
            ),
            Held::Catalogued => f.write_str("a file a tool runs or reads"),
            Held::RunsAsCode(line) => write!(
                f,
                "documentation whose line {line} is what a documentation builder runs or reads as code (MDX's import, export or {{…}}, a script element, a Jinja expression, a directive that runs or includes)"
            ),
            Held::NewKind => f.write_str(
                "a new file where the base tree has none of its kind in that directory (a new directory, the root, or the first of its kind there; a test's name or directory is no exception), where tools look for entry points by name",
            ),
            Held::UpperCaseDocument => f.write_str(
                "Markdown under an upper-case name, the convention of files tools and agents read",
            ),
            Held::ImportedByAgents => {
                f.write_str("imported by a file that instructs agents: read as instructions too")
            }
            Held::ForgehandToml => f.write_str("this bot's own settings"),
            Held::GitControl => f.write_str("a file git itself reads"),
            Held::DotPath => {
                f.write_str("a dot-file or in a dot-directory: configuration tools find by name")
            }
            Held::AgentInstructions => f.write_str("a name agents read as instructions"),
            Held::EntryPoint(why) => write!(f, "a file tools run: {why}"),
            Held::Manifest(keys) if keys.is_empty() => {
                f.write_str("a manifest that no longer parses, or was removed")
            }
            Held::Manifest(keys) => write!(f, "a manifest whose {} changed", keys.join(", ")),
            Held::NewManifest => f.write_str("a new manifest: a new package"),
            Held::Lockfile => f.write_str("a lockfile: what the project installs"),
            Held::Unknown(Some(ext)) => write!(
                f,
                "a `.{ext}` file, not a kind the gate knows to be ordinary"
            ),
            Held::Unknown(None) => {
                f.write_str("a file without an extension, not one the gate knows to be ordinary")
            }
            Held::Repository(pattern) => {
                write!(f, "the repository holds `{pattern}` ([gate] held)")
            }
        }
    }
}

impl fmt::Display for Ordinary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ordinary::Source => f.write_str("source of a known language"),
            Ordinary::Documentation => f.write_str("documentation"),
            Ordinary::TestData => f.write_str("test data"),
            Ordinary::ChangelogFragment => f.write_str("a changelog fragment"),
            Ordinary::Describing => f.write_str("a manifest whose changed keys only describe"),
            Ordinary::Repository(pattern) => {
                write!(f, "the repository allows `{pattern}` ([gate] ordinary)")
            }
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Ordinary(why) => write!(f, "ordinary: {why}"),
            Verdict::Held { why, explained } => {
                write!(f, "held: {why}")?;
                if let Some(rule) = explained {
                    write!(f, " ({}: {})", rule.what, rule.why)?;
                }
                Ok(())
            }
        }
    }
}

const LINK: u32 = 0o120000;
const EXECUTABLE: u32 = 0o100755;
const GITLINK: u32 = 0o160000;

/// The verdict on `change` under the repository's `rules`.
pub fn classify(change: &PathChange, rules: &RepoRules, contents: &dyn Contents) -> Verdict {
    let held = |why: Held| Verdict::Held {
        why,
        explained: rule_for(&change.path),
    };
    let modes = [change.old_mode, change.new_mode];
    if modes.contains(&Some(GITLINK)) {
        return held(Held::Submodule);
    }
    if modes.contains(&Some(LINK)) {
        return held(Held::Link);
    }
    if let (Some(from), Some(to)) = (change.old_mode, change.new_mode) {
        if from != to {
            return held(Held::Mode { from, to });
        }
    }
    if change.status == Status::Added && change.new_mode == Some(EXECUTABLE) {
        return held(Held::NewExecutable);
    }
    let path = FoldedPath::new(&change.path);
    if path.components == [".forgehand.toml"] {
        return held(Held::ForgehandToml);
    }
    if matches!(path.name(), ".gitattributes" | ".gitmodules") {
        return held(Held::GitControl);
    }
    if let Some(pattern) = rules.held_by(&path) {
        return held(Held::Repository(pattern));
    }
    if let Some(pattern) = rules.ordinary_by(&path) {
        return Verdict::Ordinary(Ordinary::Repository(pattern));
    }
    if contents.imported_by_agents(&change.path) {
        return held(Held::ImportedByAgents);
    }
    match built_in(change, &path, contents) {
        Ok(ordinary) => Verdict::Ordinary(ordinary),
        Err(why) => held(why),
    }
}

/// The built-in allow-list, in order.
fn built_in(
    change: &PathChange,
    path: &FoldedPath,
    contents: &dyn Contents,
) -> Result<Ordinary, Held> {
    if path.components.iter().any(|c| is_short_name(c)) {
        return Err(Held::ShortName);
    }
    if path.components.iter().any(|c| c.starts_with('.')) {
        return Err(Held::DotPath);
    }
    if let Some((_, why)) = path
        .dirs()
        .iter()
        .find_map(|d| BUILD_DIRS.iter().find(|(name, _)| name == d))
    {
        return Err(Held::EntryPoint(why));
    }
    let name = path.name();
    if let Some((_, why)) = ENTRY_POINTS.iter().find(|(p, _)| name_matches(p, name)) {
        return Err(Held::EntryPoint(why));
    }
    if let Some(manifest) = MANIFESTS.iter().find(|m| m.name == name) {
        if change.status == Status::Added {
            return Err(Held::NewManifest);
        }
        return manifest::judge(manifest, change, contents);
    }
    if LOCKFILES.contains(&name) {
        return Err(Held::Lockfile);
    }
    // Whatever the catalogue names, a tool runs or reads: in a test
    // directory too (`tests/Directory.Build.props`, `tests/Dockerfile`),
    // and with a source extension (`Package.swift`, `conanfile.py`).
    if rule_for(&change.path).is_some() || rule_for(&path.joined()).is_some() {
        return Err(Held::Catalogued);
    }
    let ext = path.extension();
    let dirs = path.dirs();
    let under = |list: &[&str]| dirs.iter().any(|d| list.contains(&d.as_str()));
    // Source first: `rules.rs` is a linter's code, `agent.py` a program;
    // an agent reads instructions from documents and unknown kinds.
    if ext.is_some_and(|e| SOURCE_EXTENSIONS.contains(&e)) {
        // Tools find their entry points by name in places no list keeps
        // up with (`dangerfile.ts`, `project/src/main/scala/`,
        // `ios/fastlane/actions/`, `_plugins/`): a new source file is
        // ordinary only beneath the root beside files of its kind the
        // base tree already has, in a test directory, or under a test's
        // name.
        // At the root, where most tools look, a new one is held beside
        // anything.
        // A test's name is no exception, nor a test directory anywhere
        // (red-team round 3: `_plugins/tests/x.rb`,
        // `fastlane/actions/test_x.rb`, `config/initializers/tests/x.rb`
        // are loaded by what scans the whole directory): only a project's
        // own test directory, at its root, where its test runner looks.
        if !in_project_tests(change, path, contents) {
            new_beside_its_kind(change, ext, contents)?;
        }
        return Ok(Ordinary::Source);
    }
    if AGENT_INSTRUCTIONS.matches(name) {
        return Err(Held::AgentInstructions);
    }
    let doc_ext = ext.is_some_and(|e| DOC_EXTENSIONS.contains(&e));
    let stem = name.split('.').next().unwrap_or(name);
    let doc_name = DOC_NAMES.contains(&stem) && (ext.is_none() || doc_ext);
    if doc_ext && !doc_name && upper_case_stem(&change.path) {
        return Err(Held::UpperCaseDocument);
    }
    // At the root, where agents and tools look for files by name
    // (`CRUSH.md`, `WARP.md`), only documentation names; beneath it,
    // documentation of any name (a design note, a Markdown test), but for
    // the names that instruct agents, held above.
    if doc_name || (doc_ext && !dirs.is_empty()) {
        // Every documentation file is judged, in test directories too
        // (red-team round 4: a site generator's input may be one), and a
        // documentation name without an extension as Markdown. A
        // deletion leaves nothing to run.
        // In a project's own test directory whose base already holds such
        // files somewhere beneath (a Markdown formatter's fixtures), they
        // are its data: a site generator's input would have built those.
        let corpus = project_tests(change, path, contents)
            .is_some_and(|tests| contents.had_code_kind(&tests, ext.unwrap_or("")));
        if change.status != Status::Deleted && !corpus {
            let text =
                |bytes: Option<Vec<u8>>| bytes.map(|b| String::from_utf8_lossy(&b).into_owned());
            // Unreadable (past what the gate reads): not known plain.
            let after = text(contents.after(&change.path)).ok_or(Held::RunsAsCode(1))?;
            let before = text(contents.before(&change.path));
            if let Some(line) = markup::runs_as_code(ext, before.as_deref(), &after) {
                return Err(Held::RunsAsCode(line));
            }
        }
        return Ok(Ordinary::Documentation);
    }
    // Templates run code when rendered (Nunjucks, Pug, Handlebars, MDX):
    // data only in a project's own test directory whose base already
    // holds files of their kind (a formatter's fixtures, red-team round
    // 4); held anywhere else, as kinds the gate does not know.
    if let Some(e) = ext.filter(|e| TEMPLATE_EXTENSIONS.contains(e)) {
        let dir = change.path.rsplit_once('/').map_or("", |(dir, _)| dir);
        if in_project_tests(change, path, contents) && contents.had_kind(dir, e) {
            return Ok(Ordinary::TestData);
        }
        return Err(Held::Unknown(Some(e.to_owned())));
    }
    let data = ext.is_some_and(|e| TEST_DATA_EXTENSIONS.contains(&e));
    if under(TEST_DIRS) && data {
        // Tools discover their configuration by name under any directory
        // (`tests/x/project.json` for Nx, `tests/dvc.yaml`,
        // `templates/tests/job.yaml` for Helm): a new file in a format
        // tools are configured in is data only beside data of its kind;
        // other data (snapshots, expected output) in a project's own test
        // directory too.
        let configures = ext.is_some_and(|e| CONFIGURATION_FORMATS.contains(&e));
        if configures || !in_project_tests(change, path, contents) {
            new_beside_its_kind(change, ext, contents)?;
        }
        return Ok(Ordinary::TestData);
    }
    if under(CHANGELOG_DIRS) && (data || doc_ext) {
        return Ok(Ordinary::ChangelogFragment);
    }
    Err(Held::Unknown(ext.map(str::to_owned)))
}

/// Template languages: code when rendered.
const TEMPLATE_EXTENSIONS: &[&str] = &[
    "mdx",
    "njk",
    "pug",
    "hbs",
    "handlebars",
    "liquid",
    "astro",
    "marko",
    "mjml",
];

/// Formats tools read their configuration in.
const CONFIGURATION_FORMATS: &[&str] = &["json", "jsonc", "json5", "yaml", "yml", "xml", "toml"];

/// Whether `path` lies in a project's own test directory: a test
/// directory at the root of the tree or of a project (a directory whose
/// base holds a manifest), not one nested in what another tool scans.
fn in_project_tests(change: &PathChange, path: &FoldedPath, contents: &dyn Contents) -> bool {
    project_tests(change, path, contents).is_some()
}

/// The project's own test directory `path` lies in, as the change
/// writes it (`tests`, `packages/web/__tests__`).
fn project_tests(
    change: &PathChange,
    path: &FoldedPath,
    contents: &dyn Contents,
) -> Option<String> {
    // The base tree is looked up by the names as written.
    let raw: Vec<&str> = change.path.split('/').collect();
    if raw.len() != path.components.len() {
        return None;
    }
    path.dirs().iter().enumerate().find_map(|(i, dir)| {
        (TEST_DIRS.contains(&dir.as_str())
            && (i == 0 || contents.is_project_root(&raw[..i].join("/"))))
        .then(|| raw[..=i].join("/"))
    })
}

/// A new file is ordinary by kind only in a directory (not the root)
/// whose base tree already holds a file of its kind: the first of a kind
/// in a directory is where tools look for entry points by name.
fn new_beside_its_kind(
    change: &PathChange,
    ext: Option<&str>,
    contents: &dyn Contents,
) -> Result<(), Held> {
    if change.status != Status::Added {
        return Ok(());
    }
    let dir = change.path.rsplit_once('/').map_or("", |(dir, _)| dir);
    let beside = !dir.is_empty() && ext.is_some_and(|e| contents.had_kind(dir, e));
    if beside {
        Ok(())
    } else {
        Err(Held::NewKind)
    }
}

/// Whether the file name's stem, as written, is upper-case (`WARP.md`,
/// `CRUSH.local.md`): two letters or more, none lower-case.
fn upper_case_stem(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    stem.chars().filter(|c| c.is_alphabetic()).count() >= 2 && !stem.chars().any(char::is_lowercase)
}

#[cfg(test)]
mod tests;
