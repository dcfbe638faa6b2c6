//! An ordinary Python project's environment, from what it declares:
//! `pyproject.toml` (`[project] dependencies`, its test extras and
//! dependency groups, Poetry's tables), `setup.cfg`'s `install_requires`
//! and test extras, `tox.ini`'s test dependencies, extras and commands.
//!
//! The setup installs the dependencies only (into `$HOME/.venv`), with
//! the project's build backend, from a view that holds these manifests
//! and nothing else. The project itself is installed by the test command,
//! offline, over the working copy (`pip install --no-deps
//! --no-build-isolation --no-index -e .`): its sources change with every
//! commit, its dependencies seldom.

use toml_edit::{ImDocument, Item, Value};

use super::inputs::read_text;
use super::{FilesError, RepoFiles};

/// The groups and extras that hold what a project's tests need.
const TEST_GROUPS: [&str; 5] = ["test", "tests", "testing", "dev", "develop"];
/// The most requirements taken from a project's manifests.
const MAX_REQUIREMENTS: usize = 200;
/// The longest requirement taken.
const MAX_REQUIREMENT_BYTES: usize = 256;

/// What an ordinary Python project declares.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Project {
    /// PEP 508 requirements: dependencies, test extras and groups, the
    /// build backend's own.
    pub requirements: Vec<String>,
    /// Whether the project can be installed (it has a `[build-system]`,
    /// a `setup.cfg` or a `setup.py`).
    pub installable: bool,
    /// Whether its backend is hatchling, whose editable install may need
    /// `editables`.
    pub hatchling: bool,
    /// Whether its version comes from version control (hatch-vcs,
    /// setuptools-scm), which has no git directory in the sandbox.
    pub scm_version: bool,
    /// tox's `[testenv] commands`, when they run pytest or Python.
    pub tox_commands: Vec<String>,
}

impl Project {
    pub fn requires_pytest(&self) -> bool {
        self.requirements.iter().any(|r| {
            let name = name_of(r);
            name == "pytest" || name.starts_with("pytest-")
        })
    }
}

/// The project `files` declares, when its root has a `pyproject.toml`
/// with dependencies or a build system, a `setup.cfg` with `[options]`,
/// or a `tox.ini`.
pub(super) fn project(files: &dyn RepoFiles) -> Result<Option<Project>, FilesError> {
    let pyproject = read_text(files, "pyproject.toml")?;
    let setup_cfg = read_text(files, "setup.cfg")?;
    let tox = read_text(files, "tox.ini")?;
    if pyproject.is_none() && setup_cfg.is_none() && tox.is_none() {
        return Ok(None);
    }
    let mut project = Project::default();
    let tox = tox.map(|text| Ini::parse(&text));
    let tox_extras: Vec<String> = tox
        .as_ref()
        .and_then(|ini| ini.get("testenv", "extras"))
        .map(|value| list_lines(&value))
        .unwrap_or_default();
    let wanted = |group: &str| {
        let group = group.to_ascii_lowercase();
        TEST_GROUPS.contains(&group.as_str())
            || tox_extras.iter().any(|e| e.eq_ignore_ascii_case(&group))
    };
    if let Some(text) = &pyproject {
        if let Ok(doc) = ImDocument::parse(text.as_str()) {
            from_pyproject(&doc, &wanted, &mut project);
        }
    }
    if let Some(text) = &setup_cfg {
        let ini = Ini::parse(text);
        if ini.has_section("options") || ini.has_section("metadata") {
            project.installable = true;
        }
        if let Some(value) = ini.get("options", "install_requires") {
            project.requirements.extend(list_lines(&value));
        }
        for (extra, value) in ini.section("options.extras_require") {
            if wanted(&extra) {
                project.requirements.extend(list_lines(&value));
            }
        }
        if ini.get("options", "use_scm_version").is_some() {
            project.scm_version = true;
        }
    }
    if files.exists("setup.py") {
        project.installable = true;
    }
    if let Some(ini) = &tox {
        if let Some(deps) = ini.get("testenv", "deps") {
            project.requirements.extend(list_lines(&deps));
        }
        if let Some(commands) = ini.get("testenv", "commands") {
            project.tox_commands = tox_commands(&commands);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    project.requirements = project
        .requirements
        .into_iter()
        .map(|r| r.trim().to_owned())
        .filter(|r| usable(r))
        .filter(|r| seen.insert(r.clone()))
        .take(MAX_REQUIREMENTS)
        .collect();
    if project.requirements.iter().any(|r| {
        let name = name_of(r);
        name == "hatch-vcs" || name == "setuptools-scm"
    }) {
        project.scm_version = true;
    }
    let declares = project.installable || !project.requirements.is_empty();
    Ok(declares.then_some(project))
}

fn from_pyproject(doc: &ImDocument<&str>, wanted: &dyn Fn(&str) -> bool, out: &mut Project) {
    let root = doc.as_table();
    if let Some(build) = root.get("build-system").and_then(Item::as_table_like) {
        out.installable = true;
        out.requirements.extend(strings(build.get("requires")));
        let backend = build
            .get("build-backend")
            .and_then(Item::as_str)
            .unwrap_or_default();
        out.hatchling = backend.starts_with("hatchling");
    }
    if let Some(project) = root.get("project").and_then(Item::as_table_like) {
        out.requirements
            .extend(strings(project.get("dependencies")));
        if let Some(extras) = project
            .get("optional-dependencies")
            .and_then(Item::as_table_like)
        {
            for (name, item) in extras.iter() {
                if wanted(name) {
                    out.requirements.extend(strings(Some(item)));
                }
            }
        }
    }
    if let Some(groups) = root.get("dependency-groups").and_then(Item::as_table_like) {
        for (name, _) in groups.iter() {
            if wanted(name) {
                group(groups, name, 0, &mut out.requirements);
            }
        }
    }
    if let Some(tool) = root.get("tool").and_then(Item::as_table_like) {
        if tool.contains_key("hatch") {
            let vcs = tool
                .get("hatch")
                .and_then(Item::as_table_like)
                .and_then(|h| h.get("version"))
                .and_then(Item::as_table_like)
                .and_then(|v| v.get("source"))
                .and_then(Item::as_str)
                == Some("vcs");
            out.scm_version |= vcs;
        }
        out.scm_version |= tool.contains_key("setuptools_scm");
        if let Some(poetry) = tool.get("poetry").and_then(Item::as_table_like) {
            poetry_requirements(poetry, out);
        }
    }
}

/// A dependency group's requirements, with the groups it includes (PEP
/// 735's `{include-group = "…"}`), a few levels deep.
fn group(groups: &dyn toml_edit::TableLike, name: &str, depth: usize, out: &mut Vec<String>) {
    let Some(items) = groups.get(name).and_then(Item::as_array) else {
        return;
    };
    for value in items.iter() {
        match value {
            Value::String(s) => out.push(s.value().clone()),
            Value::InlineTable(t) if depth < 4 => {
                if let Some(included) = t.get("include-group").and_then(Value::as_str) {
                    group(groups, included, depth + 1, out);
                }
            }
            _ => {}
        }
    }
}

/// Poetry's `dependencies`, `dev-dependencies` and non-optional groups,
/// its constraints written as PEP 440 ones.
fn poetry_requirements(poetry: &dyn toml_edit::TableLike, out: &mut Project) {
    let mut tables: Vec<&dyn toml_edit::TableLike> = Vec::new();
    for key in ["dependencies", "dev-dependencies"] {
        if let Some(table) = poetry.get(key).and_then(Item::as_table_like) {
            tables.push(table);
        }
    }
    if let Some(groups) = poetry.get("group").and_then(Item::as_table_like) {
        for (_, group) in groups.iter() {
            let Some(group) = group.as_table_like() else {
                continue;
            };
            if group.get("optional").and_then(Item::as_bool) == Some(true) {
                continue;
            }
            if let Some(table) = group.get("dependencies").and_then(Item::as_table_like) {
                tables.push(table);
            }
        }
    }
    for table in tables {
        for (name, item) in table.iter() {
            if name.eq_ignore_ascii_case("python") {
                continue;
            }
            if let Some(requirement) = poetry_requirement(name, item) {
                out.requirements.push(requirement);
            }
        }
    }
}

/// One Poetry dependency as a PEP 508 requirement; `None` for what pip
/// cannot take from a registry (a path, a git repository) or an optional
/// one.
fn poetry_requirement(name: &str, item: &Item) -> Option<String> {
    let (constraint, extras) = if let Some(text) = item.as_str() {
        (text.to_owned(), Vec::new())
    } else {
        let table = item.as_table_like()?;
        if ["path", "git", "url", "file"]
            .iter()
            .any(|k| table.contains_key(k))
            || table.get("optional").and_then(Item::as_bool) == Some(true)
        {
            return None;
        }
        let version = table
            .get("version")
            .and_then(Item::as_str)
            .unwrap_or("*")
            .to_owned();
        (version, strings(table.get("extras")))
    };
    let extras = if extras.is_empty() {
        String::new()
    } else {
        format!("[{}]", extras.join(","))
    };
    Some(format!("{name}{extras}{}", pep440(&constraint)?))
}

/// A Poetry constraint (`^1.2`, `~1.2.3`, `*`, `>=1,<2`, `1.2.3`) as
/// PEP 440's; `None` when it is not one.
fn pep440(constraint: &str) -> Option<String> {
    let mut parts = Vec::new();
    for part in constraint.split(',') {
        let part = part.trim();
        if part.is_empty() || part == "*" {
            continue;
        }
        if let Some(version) = part.strip_prefix('^') {
            let (lower, upper) = caret(version.trim())?;
            parts.push(format!(">={lower},<{upper}"));
        } else if let Some(version) = part.strip_prefix('~').filter(|v| !v.starts_with('=')) {
            let (lower, upper) = tilde(version.trim())?;
            parts.push(format!(">={lower},<{upper}"));
        } else if part.starts_with(|c: char| c.is_ascii_digit()) {
            parts.push(format!("=={part}"));
        } else {
            parts.push(part.to_owned());
        }
    }
    Some(parts.join(","))
}

fn numbers(version: &str) -> Option<Vec<u64>> {
    version
        .split('.')
        .map(|n| n.parse().ok())
        .collect::<Option<Vec<u64>>>()
        .filter(|n| !n.is_empty() && n.len() <= 4)
}

/// `^1.2.3` → `>=1.2.3,<2.0.0`; `^0.2.3` → `<0.3.0`; `^0.0.3` → `<0.0.4`.
fn caret(version: &str) -> Option<(String, String)> {
    let n = numbers(version)?;
    let first = n.iter().position(|&x| x != 0).unwrap_or(n.len() - 1);
    let mut upper: Vec<u64> = n[..=first].to_vec();
    *upper.last_mut()? += 1;
    Some((version.to_owned(), join(&upper)))
}

/// `~1.2.3` → `<1.3.0`; `~1.2` → `<1.3`; `~1` → `<2`.
fn tilde(version: &str) -> Option<(String, String)> {
    let n = numbers(version)?;
    let keep = if n.len() == 1 { 1 } else { 2 };
    let mut upper: Vec<u64> = n[..keep].to_vec();
    *upper.last_mut()? += 1;
    Some((version.to_owned(), join(&upper)))
}

fn join(n: &[u64]) -> String {
    n.iter().map(u64::to_string).collect::<Vec<_>>().join(".")
}

/// The strings of an array item.
fn strings(item: Option<&Item>) -> Vec<String> {
    item.and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a requirement can go to pip as one argument: a name first
/// (never an option: `--index-url …` would be pip's, not a package),
/// one line, bounded.
fn usable(requirement: &str) -> bool {
    !requirement.is_empty()
        && requirement.len() <= MAX_REQUIREMENT_BYTES
        && requirement.starts_with(|c: char| c.is_ascii_alphanumeric())
        && !requirement.chars().any(char::is_control)
}

/// A requirement's project name, normalised (PEP 503).
pub(super) fn name_of(requirement: &str) -> String {
    requirement
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
        .map(|c| match c {
            '_' | '.' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// An INI value's lines (setuptools' and tox's lists), without comments,
/// blank lines and pip options (`-r file`, `-e .`).
fn list_lines(value: &str) -> Vec<String> {
    value
        .lines()
        .map(|line| line.split(" #").next().unwrap_or(line).trim())
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('-'))
        .flat_map(|line| {
            // `extras = tests, docs` is a list on one line.
            if line.contains(',') && !line.contains(['<', '>', '=', '!', '~', '[', ';']) {
                line.split(',')
                    .map(|s| s.trim().to_owned())
                    .collect::<Vec<_>>()
            } else {
                vec![line.to_owned()]
            }
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// tox's `commands`, each line a command with tox's substitutions made
/// for the environment's virtualenv; only when every line is one this
/// knows how to run (Python, pytest, coverage), and has no substitution
/// it does not know.
fn tox_commands(value: &str) -> Vec<String> {
    let joined = value.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = line
            .replace("{envpython}", "python")
            .replace("{envbindir}/", "")
            .replace("{toxinidir}", ".");
        let line = strip_posargs(&line);
        if line.contains(['{', '}']) {
            return Vec::new();
        }
        let first = line.split(' ').next().unwrap_or_default();
        if !["python", "python3", "pytest", "coverage"].contains(&first) {
            return Vec::new();
        }
        out.push(line.trim().to_owned());
    }
    out
}

/// `{posargs}` and `{posargs:default}` taken out (the default kept).
fn strip_posargs(line: &str) -> String {
    let mut out = line.replace("{posargs}", "");
    while let Some(start) = out.find("{posargs:") {
        let Some(end) = out[start..].find('}') else {
            break;
        };
        let default = out[start + "{posargs:".len()..start + end].to_owned();
        out.replace_range(start..start + end + 1, &default);
    }
    out
}

/// A small INI reader: sections, `key = value` with indented
/// continuation lines (setuptools' and tox's lists), `#`/`;` comments.
struct Ini {
    entries: Vec<(String, String, String)>,
}

impl Ini {
    fn parse(text: &str) -> Ini {
        let mut entries: Vec<(String, String, String)> = Vec::new();
        let mut section = String::new();
        for line in text.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with('#') || trimmed.starts_with(';') {
                continue;
            }
            if line.starts_with([' ', '\t']) {
                if let Some(last) = entries.last_mut().filter(|e| e.0 == section) {
                    last.2.push('\n');
                    last.2.push_str(trimmed);
                }
                continue;
            }
            if let Some(name) = trimmed.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                section = name.trim().to_owned();
                continue;
            }
            if let Some((key, value)) = trimmed.split_once('=') {
                entries.push((
                    section.clone(),
                    key.trim().to_owned(),
                    value.trim().to_owned(),
                ));
            }
        }
        Ini { entries }
    }

    fn has_section(&self, name: &str) -> bool {
        self.entries.iter().any(|e| e.0 == name)
    }

    fn get(&self, section: &str, key: &str) -> Option<String> {
        self.entries
            .iter()
            .find(|e| e.0 == section && e.1 == key)
            .map(|e| e.2.clone())
    }

    fn section(&self, section: &str) -> Vec<(String, String)> {
        self.entries
            .iter()
            .filter(|e| e.0 == section)
            .map(|e| (e.1.clone(), e.2.clone()))
            .collect()
    }
}

/// `text` as one shell word.
pub(super) fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::testing::MapFiles;

    #[test]
    fn poetry_constraints_become_pep_440() {
        assert_eq!(pep440("*").unwrap(), "");
        assert_eq!(pep440("^1.2.3").unwrap(), ">=1.2.3,<2");
        assert_eq!(pep440("^0.2.3").unwrap(), ">=0.2.3,<0.3");
        assert_eq!(pep440("~1.2.3").unwrap(), ">=1.2.3,<1.3");
        assert_eq!(pep440("~1").unwrap(), ">=1,<2");
        assert_eq!(pep440("1.2.3").unwrap(), "==1.2.3");
        assert_eq!(pep440(">=1,<2").unwrap(), ">=1,<2");
        assert_eq!(pep440("~=1.4").unwrap(), "~=1.4");
        assert_eq!(pep440("^x"), None);
    }

    /// iso8601 2.1.0's pyproject.toml, as the sdist has it.
    #[test]
    fn a_poetry_project_without_a_lock() {
        let files = MapFiles::new().with(
            "pyproject.toml",
            "[tool.poetry]\nname = \"iso8601\"\n\n[tool.poetry.dependencies]\npython = \">=3.7,<4.0\"\n\n\
             [tool.poetry.group.dev.dependencies]\nmypy = \"*\"\npytest = \"*\"\nhypothesis = \"^6\"\n\
             local = { path = \"../x\" }\n\n[tool.poetry.group.docs]\noptional = true\n\
             [tool.poetry.group.docs.dependencies]\nsphinx = \"*\"\n\n\
             [build-system]\nrequires = [\"poetry-core>=1.0.0\"]\nbuild-backend = \"poetry.core.masonry.api\"\n",
        );
        let p = project(&files).unwrap().unwrap();
        assert_eq!(
            p.requirements,
            ["poetry-core>=1.0.0", "mypy", "pytest", "hypothesis>=6,<7"]
        );
        assert!(p.installable && p.requires_pytest() && !p.hatchling);
    }

    /// humanize 4.9.0: hatchling with hatch-vcs, tests as an extra that
    /// tox.ini names, tox's commands.
    #[test]
    fn a_hatch_project_with_tox() {
        let files = MapFiles::new()
            .with(
                "pyproject.toml",
                "[build-system]\nbuild-backend = \"hatchling.build\"\nrequires = [\n  \"hatch-vcs\",\n  \"hatchling\",\n]\n\n\
                 [project]\nname = \"humanize\"\ndynamic = [\"version\"]\n\n\
                 [project.optional-dependencies]\ntests = [\n  \"freezegun\",\n  \"pytest\",\n  \"pytest-cov\",\n]\ndocs = [\"mkdocs\"]\n\n\
                 [tool.hatch]\nversion.source = \"vcs\"\n",
            )
            .with(
                "tox.ini",
                "[tox]\nenv_list = py3\n\n[testenv]\nextras =\n    tests\npass_env =\n    FORCE_COLOR\ncommands =\n    {envpython} -m pytest \\\n      --cov humanize \\\n      {posargs}\n\n[testenv:lint]\ncommands = pre-commit run\n",
            );
        let p = project(&files).unwrap().unwrap();
        assert_eq!(
            p.requirements,
            [
                "hatch-vcs",
                "hatchling",
                "freezegun",
                "pytest",
                "pytest-cov"
            ]
        );
        assert!(p.hatchling && p.scm_version);
        assert_eq!(p.tox_commands, ["python -m pytest --cov humanize"]);
    }

    #[test]
    fn setup_cfg_and_dependency_groups() {
        let files = MapFiles::new()
            .with(
                "setup.cfg",
                "[metadata]\nname = x\n\n[options]\ninstall_requires =\n    requests>=2\n    six ; python_version<'3'\n\n\
                 [options.extras_require]\ntesting =\n    pytest\ndocs = sphinx\n",
            )
            .with(
                "pyproject.toml",
                "[dependency-groups]\ntest = [\"pytest>=8\", {include-group = \"lint\"}]\nlint = [\"ruff\"]\n",
            );
        let p = project(&files).unwrap().unwrap();
        assert_eq!(
            p.requirements,
            [
                "pytest>=8",
                "ruff",
                "requests>=2",
                "six ; python_version<'3'",
                "pytest"
            ]
        );
        assert!(p.installable);
    }

    #[test]
    fn options_and_unknown_substitutions_are_not_taken() {
        assert!(!usable("--index-url=http://x"));
        assert!(!usable("-e ."));
        assert!(usable("pytest>=8"));
        assert_eq!(
            tox_commands("{envpython} -m pytest {posargs:tests}"),
            ["python -m pytest tests"]
        );
        assert!(tox_commands("make test").is_empty());
        assert!(tox_commands("pytest {env:X}").is_empty());
        assert_eq!(quote("a'b"), r"'a'\''b'");
    }
}
