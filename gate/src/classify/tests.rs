use super::*;

struct NoContents;
impl Contents for NoContents {
    fn before(&self, _: &str) -> Option<Vec<u8>> {
        None
    }
    fn after(&self, path: &str) -> Option<Vec<u8>> {
        // Documentation reads as a plain page; other kinds as unreadable.
        let name = path.rsplit('/').next().unwrap_or(path);
        ([".md", ".rst", ".txt"].iter().any(|e| path.ends_with(e)) || !name.contains('.'))
            .then(|| b"A page.\n".to_vec())
    }
    fn had_kind(&self, _: &str, _: &str) -> bool {
        true
    }
    fn imported_by_agents(&self, _: &str) -> bool {
        false
    }
}

fn change(path: &str, status: Status, old: Option<u32>, new: Option<u32>) -> PathChange {
    PathChange {
        path: path.into(),
        status,
        old_mode: old,
        new_mode: new,
    }
}

fn added(path: &str) -> PathChange {
    change(path, Status::Added, None, Some(0o100644))
}

fn verdict(path: &str) -> Verdict {
    classify(&added(path), &RepoRules::none(), &NoContents)
}

/// Issue 25: 37 files passed the catalogue as ordinary changes, and
/// names a case-insensitive file system folds onto watched ones. Each is
/// held by the default, with no row written for it.
#[test]
fn what_the_red_team_found_is_held_without_a_row_for_it() {
    let found = [
        ".mergify.yml",
        "OWNERS",
        ".kodiak.toml",
        ".readthedocs.yaml",
        "atlantis.yaml",
        "tox.toml",
        "hatch.toml",
        "pixi.toml",
        "uv.toml",
        "tools/bazel",
        "app.vcxproj",
        ".jvmopts",
        "mkdocs.yml",
        "captainhook.json",
        ".huskyrc",
        ".dir-locals-2.el",
        ".iex.exs",
        ".env.local",
        "AGENTS.override.md",
        "CLAUDE.local.md",
        ".github/agents/x.agent.md",
        ".github/workflows/ci.yml",
        "Makefile",
        "Dockerfile",
        "Jenkinsfile",
        "setup.py",
        "conftest.py",
        "build.rs",
        "vite.config.ts",
        "requirements-dev.txt",
        "CMakeLists.txt",
        "docs/conf.py",
        "lib/x.pth",
        "package.json",
        "Cargo.toml",
        "scripts/release.nu",
        "docs/index.mdx",
        // Twins a case-insensitive file system folds onto watched names.
        ".v\u{17f}code/tasks.json",
        ".hu\u{17f}ky/pre-commit",
        "Ma\u{212a}efile",
        "CLAUDE\u{200b}.md",
        "\u{feff}.github/workflows/ci.yml",
        "AGENTS\u{200c}.md",
    ];
    for path in found {
        let v = verdict(path);
        assert!(v.is_held(), "{path:?}: {v}");
    }
}

/// The control: ordinary source, test and documentation changes in
/// Python, TypeScript, Rust and Go pass with no finding.
#[test]
fn ordinary_source_tests_and_docs_pass() {
    let ordinary = [
        "src/humanize/number.py",
        "tests/test_number.py",
        "src/pkg/__init__.py",
        "stubs/x.pyi",
        "src/index.ts",
        "src/components/Button.tsx",
        "test/index.test.ts",
        "src/__tests__/util.spec.js",
        "src/lib.rs",
        "crates/core/src/rules/mod.rs",
        "crates/linter/src/rules.rs",
        "tests/integration.rs",
        "cmd/server/main.go",
        "pkg/store/store_test.go",
        "README.md",
        "docs/guide.rst",
        "docs/usage.txt",
        "AUTHORS",
        "LICENSE",
        "CHANGELOG.md",
        "changelog/1234.bugfix.rst",
        "changelog_unreleased/javascript/1234.md",
        "tests/fixtures/config.yaml",
        "tests/format/yaml/case/input.yml",
        "crates/x/tests/snapshots/x__case.snap",
        "src/__snapshots__/button.test.tsx.snap",
        "testdata/golden.json",
    ];
    for path in ordinary {
        let v = verdict(path);
        assert!(!v.is_held(), "{path:?}: {v}");
    }
}

#[test]
fn links_submodules_and_mode_changes_are_held_whatever_the_name() {
    let rules = RepoRules::parse(b"[gate]\nordinary = [\"**\"]\n").unwrap();
    for (c, why) in [
        (
            change("src/a.py", Status::Added, None, Some(0o120000)),
            Held::Link,
        ),
        (
            change("vendor/lib", Status::Added, None, Some(0o160000)),
            Held::Submodule,
        ),
        (
            change("src/a.py", Status::Modified, Some(0o100644), Some(0o100755)),
            Held::Mode {
                from: 0o100644,
                to: 0o100755,
            },
        ),
        (
            change(
                ".forgehand.toml",
                Status::Modified,
                Some(0o100644),
                Some(0o100644),
            ),
            Held::ForgehandToml,
        ),
        (
            change("a/.gitattributes", Status::Added, None, Some(0o100644)),
            Held::GitControl,
        ),
    ] {
        assert_eq!(
            classify(&c, &rules, &NoContents),
            Verdict::Held {
                why,
                explained: crate::integrity::rule_for(&c.path)
            },
            "{}",
            c.path
        );
    }
}

/// A maintainer's `[gate]` widens and narrows the built-in list; `held`
/// wins.
#[test]
fn the_repositorys_rules_widen_and_narrow() {
    let rules = RepoRules::parse(
        b"[gate]\nordinary = [\"config/*.yaml\", \"db/**\"]\nheld = [\"db/migrations/**\"]\n",
    )
    .unwrap();
    let v = |p: &str| classify(&added(p), &rules, &NoContents);
    assert_eq!(
        v("config/app.yaml"),
        Verdict::Ordinary(Ordinary::Repository("config/*.yaml".into()))
    );
    assert!(v("db/migrations/0001.py").is_held());
    assert!(!v("db/seed.sql").is_held());
    assert!(
        v("config/nested/app.yaml").is_held(),
        "the built-in list still holds what no pattern names"
    );
}

#[test]
fn a_held_path_the_catalogue_names_is_explained_by_its_row() {
    let v = verdict(".github/workflows/ci.yml");
    let Verdict::Held { explained, .. } = &v else {
        panic!("{v}");
    };
    assert_eq!(explained.map(|r| r.what), Some("GitHub Actions workflows"));
    assert!(v.to_string().contains("GitHub Actions workflows"), "{v}");
}

/// The catalogue's rows are the explanation now, not the boundary: but
/// each row's example, added by the agent, is still held.
#[test]
fn every_catalogue_rows_example_is_held() {
    let mut passed = Vec::new();
    for rule in crate::integrity::CATALOGUE {
        if !verdict(rule.example).is_held() {
            passed.push(rule.example);
        }
    }
    assert!(passed.is_empty(), "held by no rule: {passed:?}");
}

/// The base tree's directories and the extensions of their files
/// (`"src:py"`), for the rule on new source files.
struct Base(&'static [&'static str]);
impl Contents for Base {
    fn before(&self, _: &str) -> Option<Vec<u8>> {
        None
    }
    fn after(&self, path: &str) -> Option<Vec<u8>> {
        // Documentation reads as a plain page; other kinds as unreadable.
        let name = path.rsplit('/').next().unwrap_or(path);
        ([".md", ".rst", ".txt"].iter().any(|e| path.ends_with(e)) || !name.contains('.'))
            .then(|| b"A page.\n".to_vec())
    }
    fn had_kind(&self, dir: &str, ext: &str) -> bool {
        self.0.contains(&format!("{dir}:{ext}").as_str())
    }
    fn is_project_root(&self, dir: &str) -> bool {
        self.0.contains(&format!("{dir}:manifest").as_str())
    }
    fn imported_by_agents(&self, path: &str) -> bool {
        path == "docs/dev-guide.md"
    }
}

/// A new version of every changed file reading `0`, the base beside
/// files of every kind, `docs/site` a project (a documentation site).
struct Page(&'static str);
impl Contents for Page {
    fn before(&self, _: &str) -> Option<Vec<u8>> {
        None
    }
    fn after(&self, _: &str) -> Option<Vec<u8>> {
        Some(self.0.as_bytes().to_vec())
    }
    fn had_kind(&self, _: &str, _: &str) -> bool {
        true
    }
    fn imported_by_agents(&self, _: &str) -> bool {
        false
    }
    fn is_project_root(&self, dir: &str) -> bool {
        dir == "docs/site"
    }
}

fn modified(path: &str) -> PathChange {
    change(path, Status::Modified, Some(0o100644), Some(0o100644))
}

/// Red-team round 1 against the fail-closed gate (issue 25): what passed
/// as ordinary. Fixed by mechanism, not by rows: lockfiles are held;
/// documentation is ordinary only in documentation directories or under
/// documentation names; whatever the catalogue names is held in test
/// directories and with source extensions too; a new source file at the
/// top of the tree is held; a new file made executable is held; names
/// NTFS or Windows' short names alias are folded or held.
#[test]
fn what_red_team_round_one_found_is_held() {
    let base = Base(&[
        "src:py",
        "src/pkg:py",
        "lib:js",
        ":py",
        ":js",
        "config:exs",
        "tests:py",
        "tests/fixtures:yaml",
    ]);
    let held = |change: PathChange| classify(&change, &RepoRules::none(), &base);
    let mut passed = Vec::new();
    let added_anywhere = [
        // Agent instructions under names no list keeps up with.
        "CRUSH.md",
        "crush.md",
        "CRUSH.local.md",
        "WARP.md",
        "GEM\u{131}N\u{131}.md",
        "CLAUDE~1/commands/x.md",
        // Requirement files outside the root's names.
        "requirements/dev.txt",
        // Catalogue rows with a source or documentation extension.
        "Package.swift",
        "conanfile.py",
        "conanfile.txt",
        "hatch_build.py",
        "pdm_build.py",
        "meson_options.txt",
        "install.sh",
        "bootstrap.sh",
        "karma.conf.ts",
        // New entry points at the top of the tree, in no list.
        "Rakefile.rb",
        "gems.rb",
        "project.clj",
        "Setup.lhs",
        "xmake.lua",
        "premake5.lua",
        "rector.php",
        "build.ps1",
        "dangerfile.ts",
        "gatsby-node.js",
        "ember-cli-build.js",
        "webpack.mix.js",
        "serverless.ts",
        "_plugins/x.rb",
        "magefiles/x.go",
        "hook/build.dart",
        // Build and CI files in test and changelog directories.
        "tests/Directory.Build.props",
        "tests/NuGet.config",
        "tests/app.csproj",
        "tests/build.gradle",
        "tests/pom.xml",
        "tests/go.mod",
        "tests/meson.build",
        "tests/Makefile",
        "tests/pytest.ini",
        "tests/tox.ini",
        "tests/Dockerfile",
        "tests/docker-compose.yml",
        "tests/Jenkinsfile",
        "tests/action.yml",
        "news/Dockerfile",
        "changes/Makefile",
        // A dot-file, whatever git makes of it.
        ".gitignore",
    ];
    for path in added_anywhere {
        if !held(added(path)).is_held() {
            passed.push(path.to_owned());
        }
    }
    for path in [
        "package-lock.json",
        "yarn.lock",
        "uv.lock",
        "composer.lock",
        "Cargo.lock",
        ".gitignore",
    ] {
        if !held(modified(path)).is_held() {
            passed.push(format!("{path} (modified)"));
        }
    }
    let executable = change("src/run.py", Status::Added, None, Some(0o100755));
    if !held(executable).is_held() {
        passed.push("src/run.py (new, executable)".into());
    }
    for manifest in [
        "Cargo.toml",
        "package.json",
        "pyproject.toml",
        "src/web/package.json",
    ] {
        if !held(added(manifest)).is_held() {
            passed.push(format!("{manifest} (new)"));
        }
    }
    assert!(passed.is_empty(), "passed as ordinary: {passed:#?}");

    // What stays ordinary: new code beneath an existing directory or in
    // tests, documentation where it lives, changes to existing code.
    for change in [
        added("src/pkg/new_module.py"),
        added("tests/test_new.py"),
        added("tests/fixtures/data.yaml"),
        added("docs/guide.md"),
        added("src/pkg/README.md"),
        added("src/pkg/design.md"),
        added("crates/ty/resources/mdtest/call.md"),
        added("CONTRIBUTING.md"),
        modified("calc.py"),
        modified("index.js"),
    ] {
        let verdict = held(change.clone());
        assert!(!verdict.is_held(), "{}: {verdict}", change.path);
    }
}

/// Red-team round 2 against the fail-closed gate (issue 25). Fixed by
/// mechanism: a new source file is ordinary only beside files of its
/// kind (at any depth, not only the top); test directories hold test
/// data by kind, not anything; upper-case Markdown names are held
/// wherever they are; what agent files import is held as they are.
#[test]
fn what_red_team_round_two_found_is_held() {
    let base = Base(&[
        "src:py",
        "packages/web:js",
        "project:scala",
        "ios:swift",
        "docs:md",
        "tests/fixtures:json",
    ]);
    let mut passed = Vec::new();
    for path in [
        // Agent files in subdirectories.
        "packages/web/WARP.md",
        "src/WARP.md",
        "src/CRUSH.md",
        "src/crush.md",
        // Imported by the base's CLAUDE.md.
        "docs/dev-guide.md",
        // Entry points below the top of the tree.
        "project/src/main/scala/Evil.scala",
        "ios/fastlane/actions/evil.rb",
        "Packages/Foo/Package@swift-5.9.swift",
        "docs/_plugins/evil.rb",
        "packages/web/project.clj",
        "packages/x/Rakefile.rb",
        "packages/x/gatsby-node.js",
        // Build and runner files in test directories that no row names,
        // and binaries.
        "tests/Foo.Tests/Foo.Tests.csproj.user",
        "test/dune",
        "tests/pytest.toml",
        "tests/BUCK",
        "tests/BUILD.pants",
        "tests/Jamfile",
        "tests/Dockerfile-integration",
        "tests/lib.so",
        "tests/tool.jar",
    ] {
        if !classify(&added(path), &RepoRules::none(), &base).is_held() {
            passed.push(path);
        }
    }
    assert!(passed.is_empty(), "passed as ordinary: {passed:#?}");
    for path in [
        "src/new_module.py",
        "packages/web/util.js",
        "tests/fixtures/case.json",
        "tests/golden/out.txt",
        "docs/guide.md",
        "src/design.md",
    ] {
        let verdict = classify(&added(path), &RepoRules::none(), &base);
        assert!(!verdict.is_held(), "{path}: {verdict}");
    }
}

/// Red-team round 2, H3: a name with a zero-width character in the diff
/// was judged escaped (`tests/\u{200c}Makefile` as text), not folded,
/// and committed; `gate explain` with the same name said held.
#[test]
fn names_in_the_diff_are_folded_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let repo = git2::Repository::init(dir.path()).unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/app.py"), "x = 1\n").unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(std::path::Path::new("src/app.py")).unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
        .unwrap();
    for path in [
        "tests/\u{200c}Makefile",
        "src/\u{200c}conftest.py",
        "src/AGE\u{200c}NTS.md",
        "tests/\u{200c}.gitattributes",
    ] {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, "x\n").unwrap();
    }
    let contents = changes::WorkingContents::new(&repo, dir.path().to_owned());
    let changed = changes::working_changes(&repo).unwrap();
    assert_eq!(changed.len(), 4, "{changed:?}");
    for change in changed {
        let verdict = classify(&change, &RepoRules::none(), &contents);
        assert!(verdict.is_held(), "{:?}: {verdict}", change.path);
    }
}

/// Red-team round 3 against the fail-closed gate (issue 25). Fixed by
/// mechanism: a test's name or directory no longer makes a new file
/// ordinary where its directory has none of its kind (tools that load a
/// whole directory do not care for names), test data included; a line a
/// documentation builder runs or reads, added to documentation, holds
/// it.
#[test]
fn what_red_team_round_three_found_is_held() {
    let base = Base(&[
        "docs:md",
        "packages/web:manifest",
        "tests:py",
        "tests/unit:py",
        "tests/fixtures:json",
        "docs/_plugins:rb",
        "ios/fastlane/actions:rb",
        "playbooks/filter_plugins:py",
        "config/initializers:rb",
    ]);
    let mut passed = Vec::new();
    for path in [
        "project/src/main/scala/tests/Evil.scala",
        "docs/_plugins/tests/evil.rb",
        "config/initializers/tests/evil.rb",
        "test_evil.py",
        "evil_test.go",
        "evil.spec.ts",
        "Packages/Foo/Package.test.swift",
        "tests/evil/project.json",
        "tests/new_dir/dvc.yaml",
        "charts/app/templates/tests/job.yaml",
        "docs/tests/new/evil.rb",
    ] {
        if !classify(&added(path), &RepoRules::none(), &base).is_held() {
            passed.push(path);
        }
    }
    assert!(passed.is_empty(), "passed as ordinary: {passed:#?}");
    // Beside their kind, tests and their data stay ordinary; and in a
    // project's own test directory (at the root of the tree or of a
    // package), new directories of tests and their snapshots.
    for path in [
        "tests/test_more.py",
        "tests/unit/test_x.py",
        "tests/fixtures/case.json",
        "tests/new_dir/test_x.py",
        "tests/format/js/await/format.test.js",
        "tests/format/js/await/__snapshots__/format.test.js.snap",
        "packages/web/tests/new/x.test.js",
    ] {
        let verdict = classify(&added(path), &RepoRules::none(), &base);
        assert!(!verdict.is_held(), "{path}: {verdict}");
    }
    // Documentation that runs, in an existing docs directory.
    let mdx = Page("import {execSync} from 'child_process';\nexport const out = execSync('id');\n");
    let verdict = classify(&added("docs/intro.md"), &RepoRules::none(), &mdx);
    assert_eq!(
        verdict.to_string().split(" (").next().unwrap(),
        "held: documentation whose line 1 is what a documentation builder runs or reads as code"
    );
    let vue = Page(
        "# Home\n\n<script setup>\nimport { execSync } from 'node:child_process'\n</script>\n",
    );
    assert!(classify(&modified("website/docs/index.md"), &RepoRules::none(), &vue).is_held());
    // In a test directory too (red-team round 4: a site generator's
    // input may be one).
    assert!(classify(
        &added("tests/format/markdown/x.md"),
        &RepoRules::none(),
        &mdx
    )
    .is_held());
    let prose = Page("# Home\n\nRun `make {target}`.\n");
    assert!(!classify(&modified("docs/index.md"), &RepoRules::none(), &prose).is_held());
}

/// Red-team round 4 (issue 25): templates in a project's test directory
/// are code unless the directory already holds their kind (a formatter's
/// fixtures); Markdown in a test directory is judged (a site generator's
/// input may be one). What the markup and the references missed is in
/// `markup.rs` and `imports.rs`.
#[test]
fn what_red_team_round_four_found_is_held() {
    let base = Base(&[
        "tests:py",
        "docs/site:manifest",
        "tests/format/handlebars:hbs",
    ]);
    for path in [
        "tests/page.njk",
        "tests/page.pug",
        "docs/x.mdx",
        "tests/x.liquid",
    ] {
        let verdict = classify(&added(path), &RepoRules::none(), &base);
        assert!(verdict.is_held(), "{path}: {verdict}");
    }
    let verdict = classify(
        &modified("tests/format/handlebars/case.hbs"),
        &RepoRules::none(),
        &base,
    );
    assert!(!verdict.is_held(), "{verdict}");
    let vue = Page("<span :title=\"process\">hi</span>\n");
    for path in ["docs/site/test/page.md", "tests/page.md", "docs/guide.md"] {
        assert!(
            classify(&added(path), &RepoRules::none(), &vue).is_held(),
            "{path}"
        );
    }
}
