//! What the gate knows to be ordinary: an allow-list. Whatever is not
//! named here is held for a maintainer (docs/security.md shows these
//! lists; a test keeps the two equal). Names are compared folded
//! ([`super::names::fold`]).

/// Source and test files of known languages, by extension. Snapshots
/// (`.snap`) are what a test run writes.
pub const SOURCE_EXTENSIONS: &[&str] = &[
    "rs", "py", "pyi", "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts", "go", "java", "kt",
    "scala", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "ipp", "inl", "m", "mm", "swift",
    "rb", "php", "cs", "fs", "fsi", "ex", "exs", "erl", "hrl", "hs", "lhs", "ml", "mli", "clj",
    "cljs", "cljc", "lua", "r", "jl", "dart", "zig", "nim", "vue", "svelte", "css", "scss", "sass",
    "less", "html", "htm", "graphql", "gql", "proto", "sql", "sh", "bash", "pl", "pm", "t", "elm",
    "purs", "v", "sv", "vhd", "vhdl", "asm", "s", "f90", "f", "for", "pas", "d", "cr", "gleam",
    "ps1", "snap",
];

/// Documentation, by extension: ordinary beneath the root, or at the
/// root under a documentation name ([`DOC_NAMES`]), unless its name
/// instructs an agent ([`AGENT_INSTRUCTIONS`]) or a tool reads it
/// ([`ENTRY_POINTS`]). At the root (`CRUSH.md`, `WARP.md`) a Markdown
/// file is what agents are told to read under names no list keeps up
/// with: held.
pub const DOC_EXTENSIONS: &[&str] = &["md", "markdown", "rst", "txt", "adoc", "asciidoc"];

/// Documentation by name, wherever it is, with no extension or a
/// documentation extension (`README`, `readme.md`, `README.zh-CN.md`).
pub const DOC_NAMES: &[&str] = &[
    "authors",
    "contributors",
    "license",
    "licence",
    "copying",
    "notice",
    "changelog",
    "changes",
    "history",
    "news",
    "readme",
    "todo",
    "thanks",
    "credits",
    "citation",
    "contributing",
    "code_of_conduct",
    "security",
    "support",
    "governance",
    "maintainers",
    "releasing",
    "upgrading",
    "migrating",
];

/// Names that instruct an agent, wherever they are and whatever their
/// extension: a prefix of the name, a part of it, or its end.
pub const AGENT_INSTRUCTIONS: AgentNames = AgentNames {
    prefixes: &[
        "agent",
        "claude",
        "gemini",
        "codex",
        "copilot",
        "cursor",
        "windsurf",
        "cline",
        "aider",
        "conventions",
        "junie",
        "opencode",
        "goose",
        "openhands",
        "qwen",
        "warp",
        "crush",
        "kiro",
        "trae",
        "augment",
    ],
    parts: &["instructions", "rules", "prompt", "persona"],
    suffixes: &[".agent.md", ".chatmode.md", ".prompt.md", ".mdc"],
};

/// Where names that instruct an agent are looked for.
pub struct AgentNames {
    pub prefixes: &'static [&'static str],
    pub parts: &'static [&'static str],
    pub suffixes: &'static [&'static str],
}

impl AgentNames {
    /// Whether the folded `name` instructs an agent.
    pub fn matches(&self, name: &str) -> bool {
        self.prefixes.iter().any(|p| name.starts_with(p))
            || self.parts.iter().any(|p| name.contains(p))
            || self.suffixes.iter().any(|s| name.ends_with(s))
    }
}

/// Files of known kinds that a build, a test runner, a package manager or
/// a docs builder runs or reads as code: held though their extension is
/// ordinary. A `*` stands for any characters within the name.
pub const ENTRY_POINTS: &[(&str, &str)] = &[
    ("setup.py", "setuptools runs it to install and build"),
    ("conftest.py", "pytest imports it before any test"),
    ("noxfile.py", "nox's sessions"),
    ("fabfile.py", "Fabric's tasks"),
    ("tasks.py", "Invoke's tasks"),
    ("dodo.py", "doit's tasks"),
    ("pavement.py", "Paver's tasks"),
    ("sitecustomize.py", "Python imports it at start-up"),
    ("usercustomize.py", "Python imports it at start-up"),
    ("conf.py", "Sphinx runs it to build the documentation"),
    ("build.rs", "Cargo runs it on every build"),
    ("build.zig", "Zig's build script"),
    ("magefile.go", "Mage's targets"),
    ("setup.hs", "Cabal's build script"),
    ("mix.exs", "Mix's project: dependencies and tasks"),
    ("makefile.pl", "Perl's build script"),
    ("build.pl", "Perl's build script"),
    ("autogen.sh", "Autotools' bootstrap, run before every build"),
    ("*.config.js", "a tool's configuration, run as code"),
    ("*.config.*.js", "a tool's configuration, run as code"),
    ("*.config.*.ts", "a tool's configuration, run as code"),
    ("*.config.mjs", "a tool's configuration, run as code"),
    ("*.config.cjs", "a tool's configuration, run as code"),
    ("*.config.ts", "a tool's configuration, run as code"),
    ("*.config.mts", "a tool's configuration, run as code"),
    ("*.config.cts", "a tool's configuration, run as code"),
    ("*.conf.js", "a tool's configuration, run as code"),
    (
        "package@swift-*.swift",
        "SwiftPM's manifest for a tools version, preferred to Package.swift",
    ),
    ("gulpfile.*", "gulp's tasks"),
    ("gruntfile.*", "Grunt's tasks"),
    ("jakefile.*", "Jake's tasks"),
    ("cmakelists.txt", "CMake runs it on every build"),
    ("*requirements*.txt", "pip installs what it names"),
    ("*constraints*.txt", "pip installs what it pins"),
    ("robots.txt", "what crawlers of the published site may read"),
];

/// Directories whose every file a build compiles and runs (Gradle's
/// `buildSrc`): held whatever the file's kind.
pub const BUILD_DIRS: &[(&str, &str)] = &[
    ("buildsrc", "Gradle compiles and runs it on every build"),
    ("requirements", "pip installs what its files name"),
];

/// Directories whose files are test data: source files, and data of the
/// kinds in [`TEST_DATA_EXTENSIONS`], beneath one are ordinary, but for
/// dot-files, links, entry points and agent instructions; any other kind
/// there (a build file a runner finds by name, `dune`, `BUCK`,
/// `x.csproj.user`, `pytest.toml`, a binary) is held.
pub const TEST_DIRS: &[&str] = &[
    "test",
    "tests",
    "__tests__",
    "spec",
    "specs",
    "testing",
    "testdata",
    "test_data",
    "test-data",
    "fixtures",
    "fixture",
    "__fixtures__",
    "__snapshots__",
    "snapshots",
    "golden",
    "goldens",
];

/// What a test reads as data, by extension: ordinary beneath a test
/// directory. Configuration formats a tool may find by name there
/// (TOML, INI, `.cfg`, `.props`) and binaries are not among them.
pub const TEST_DATA_EXTENSIONS: &[&str] = &[
    "json", "jsonl", "ndjson", "yaml", "yml", "txt", "csv", "tsv", "xml", "html", "htm", "md",
    "rst", "snap", "svg", "png", "jpg", "jpeg", "gif", "webp", "ico", "bmp", "pdf", "gz", "bz2",
    "xz", "zst", "zip", "tar", "tgz", "bin", "dat", "out", "err", "in", "expected", "golden",
    "diff", "patch", "ipynb", "pyi", "log", "eml", "msg", "wav", "mp3", "ttf", "woff", "woff2",
    "flow",
];

/// Directories of changelog fragments (towncrier, changesets,
/// prettier's): ordinary with a documentation or a test-data extension.
pub const CHANGELOG_DIRS: &[&str] = &[
    "changelog",
    "changelog.d",
    "changes",
    "news",
    "newsfragments",
    "changelog_unreleased",
    "unreleased",
];

/// Manifests judged by what changed in them: ordinary when every key
/// that changed is one that only describes (`version`, `description`,
/// lint levels), held when any other changed (a dependency, a script, a
/// build or plugin setting; a name, which another package may be asked
/// for by; a file it publishes or reads, such as `readme`; whether and
/// where it is published; a tool's table that can run commands) or the
/// file does not parse. A new manifest is held: a new package is more
/// than its keys.
pub const MANIFESTS: &[Manifest] = &[
    Manifest {
        name: "cargo.toml",
        format: Format::Toml,
        describing: &[
            "package.version",
            "package.description",
            "package.authors",
            "package.keywords",
            "package.categories",
            "package.homepage",
            "package.repository",
            "package.documentation",
            "package.license",
            "package.rust-version",
            "package.edition",
            "lints",
            "workspace.lints",
            "badges",
        ],
    },
    Manifest {
        name: "pyproject.toml",
        format: Format::Toml,
        describing: &[
            "project.version",
            "project.description",
            "project.authors",
            "project.maintainers",
            "project.keywords",
            "project.classifiers",
            "project.urls",
            "project.requires-python",
            "tool.ruff",
            "tool.black",
            "tool.isort",
            "tool.codespell",
            "tool.typos",
        ],
    },
    Manifest {
        name: "package.json",
        format: Format::Json,
        describing: &[
            "version",
            "description",
            "keywords",
            "author",
            "contributors",
            "maintainers",
            "license",
            "homepage",
            "repository",
            "bugs",
            "funding",
        ],
    },
];

#[derive(Debug)]
pub struct Manifest {
    /// The folded file name.
    pub name: &'static str,
    pub format: Format,
    /// Dotted key paths whose values only describe; a key is ordinary to
    /// change when it is one of these or lies beneath one.
    pub describing: &'static [&'static str],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

/// Lockfiles: held. What one resolves from is a URL, a path, a registry
/// and a package name in formats of their own, and a lockfile's diff is
/// the one a reviewer's forge folds away: any change to what a project
/// installs is for a maintainer to see.
pub const LOCKFILES: &[&str] = &[
    "cargo.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "uv.lock",
    "poetry.lock",
    "pipfile.lock",
    "pdm.lock",
    "gemfile.lock",
    "composer.lock",
    "go.sum",
    "bun.lock",
    "deno.lock",
];

/// Whether the folded `name` matches `pattern`, where `*` stands for any
/// characters.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name.ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_patterns_match_as_globs_within_a_name() {
        assert!(name_matches("*.config.js", "vite.config.js"));
        assert!(!name_matches("*.config.js", "config.js"));
        assert!(name_matches(
            "*requirements*.txt",
            "dev-requirements-lock.txt"
        ));
        assert!(name_matches("gulpfile.*", "gulpfile.babel.js"));
        assert!(name_matches("setup.py", "setup.py"));
        assert!(!name_matches("setup.py", "setup.pyi"));
    }

    #[test]
    fn agent_instructions_are_found_by_prefix_part_or_end() {
        for name in [
            "agents.md",
            "agents.override.md",
            "claude.local.md",
            "gemini.md",
            "x.agent.md",
            "copilot-instructions.md",
            "review.prompt.md",
            "project-rules.md",
            "conventions.md",
            "style.mdc",
        ] {
            assert!(AGENT_INSTRUCTIONS.matches(name), "{name}");
        }
        for name in ["readme.md", "changelog.md", "design.md", "usage.txt"] {
            assert!(!AGENT_INSTRUCTIONS.matches(name), "{name}");
        }
    }
}
