//! The environment a repository gets when it declares none: detected from
//! the lockfiles and manifests at its root, so that a project with the
//! usual files builds and tests with no file of Forgehand's in it.
//!
//! | found at the root | toolchain | Debian packages | setup | test |
//! |---|---|---|---|---|
//! | `pnpm-lock.yaml` | pnpm | nodejs, npm | npm installs pnpm into `$HOME/.local`, then `pnpm install --frozen-lockfile` | `pnpm test` ¹ |
//! | `yarn.lock` | Yarn | nodejs, yarnpkg | `yarnpkg install --frozen-lockfile` | `yarnpkg test` ¹ |
//! | `package-lock.json`, `npm-shrinkwrap.json` | npm | nodejs, npm | `npm ci` | `npm test` ¹ |
//! | `package.json` alone | npm | nodejs, npm | `npm install` | `npm test` ¹ |
//! | `uv.lock` | uv | python3-venv | pip installs uv into `$HOME/.uv`, then `uv sync --frozen` | `.venv/bin/python -m pytest` ² |
//! | `poetry.lock` | Poetry | python3-venv | pip installs Poetry into `$HOME/.poetry`, then `poetry install` (virtualenv in `.venv`) | `.venv/bin/python -m pytest` ² |
//! | `requirements.txt` | pip | python3-venv, python3-pip | a virtualenv in `$HOME/.venv`, `pip install -r requirements.txt` | `$HOME/.venv/bin/python -m pytest` ³ |
//! | `pyproject.toml`, `setup.cfg` or `tox.ini` (none of the above) | pip | python3-venv, python3-pip | a virtualenv in `$HOME/.venv`, `pip install` of the dependencies, test extras and groups, tox's deps and the build backend ([`python_project`]) | the project installed offline (`pip install --no-deps --no-build-isolation --no-index -e .`), then tox's commands or `python -m pytest` ⁴ |
//! | `Cargo.lock` or `Cargo.toml` | Cargo | cargo | `cargo fetch` | `cargo test --offline` |
//! | `go.mod` | Go modules | golang-go | `go mod download` | `go test ./...` |
//!
//! ¹ When `package.json` has a `scripts.test` other than npm's placeholder
//! (`echo "Error: no test specified" && exit 1`).
//! ² When the lockfile locks `pytest`.
//! ³ When a requirement file (with what it includes) names `pytest` or a
//! `pytest-` plugin; or when the repository shows pytest tests without
//! requiring pytest (a `pytest.ini`, `conftest.py`, `tests/conftest.py`,
//! `tests/__init__.py`, or a pytest section in `pyproject.toml`,
//! `setup.cfg` or `tox.ini`), and then the setup installs `pytest` too,
//! since the tests cannot run without it. A plain `tests/` directory of
//! `unittest` files is not seen: [`RepoFiles`] answers for files only.
//!
//! ⁴ When pytest is among the requirements, tox gives commands, or the
//! repository shows pytest tests (pytest is then installed too).
//!
//! uv and Poetry install the dependencies only (`--no-install-project`,
//! `--no-root`): the setup sees only the manifests and lockfiles
//! ([`super::inputs`]), not the project's sources.
//!
//! One toolchain per language is taken, the first in the table's order
//! (a pnpm lockfile beside a stale `package-lock.json` is a pnpm project);
//! the languages combine, joined with ` && ` (a Python service with a
//! JavaScript front end needs both).
//!
//! Debian bookworm packages nodejs, npm, yarnpkg (Yarn 1), python3-venv,
//! python3-pip, cargo and golang-go; pnpm, uv and Poetry are not packaged
//! (Poetry is, at 1.3, too old for today's lockfiles), so the setup
//! installs them through the registry of the language they are written
//! in, into `HOME`, which the environment keeps. pnpm's version is the
//! one `package.json`'s `packageManager` names, when it names one. The
//! toolchains in bookworm are older than some projects need (cargo 1.63
//! reads no version 4 lockfile; Go 1.19 does not download the toolchain a
//! `go.mod` asks for): such a project declares its own setup in
//! `.forgehand.toml`.
//!
//! Every command runs in `/workspace`, the checkout of the base commit.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::inputs::{read_text, requirement_closure};
use super::python_project;
use super::{FilesError, RepoFiles};

/// npm's `scripts.test` in a fresh `package.json`, which only fails.
const NPM_PLACEHOLDER: &str = "echo \"Error: no test specified\" && exit 1";

/// Files showing a repository has pytest tests.
const PYTEST_FILES: [&str; 6] = [
    "pytest.ini",
    "conftest.py",
    "tests/conftest.py",
    "test/conftest.py",
    "tests/__init__.py",
    "test/__init__.py",
];

/// Configuration files and the section that configures pytest in each.
const PYTEST_SECTIONS: [(&str, &str); 3] = [
    ("pyproject.toml", "[tool.pytest.ini_options]"),
    ("setup.cfg", "[tool:pytest]"),
    ("tox.ini", "[pytest]"),
];

/// A toolchain detection recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Toolchain {
    Npm,
    Pnpm,
    Yarn,
    Pip,
    Uv,
    Poetry,
    /// An ordinary project: `pyproject.toml`, `setup.cfg`, `tox.ini`
    /// without a lockfile or `requirements.txt`.
    PythonProject,
    Cargo,
    Go,
}

impl fmt::Display for Toolchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Toolchain::Npm => "npm",
            Toolchain::Pnpm => "pnpm",
            Toolchain::Yarn => "Yarn",
            Toolchain::Pip => "pip",
            Toolchain::Uv => "uv",
            Toolchain::Poetry => "Poetry",
            Toolchain::PythonProject => "pip (the project's manifests)",
            Toolchain::Cargo => "Cargo",
            Toolchain::Go => "Go modules",
        })
    }
}

/// What one detected toolchain contributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    pub toolchain: Toolchain,
    pub packages: &'static [&'static str],
    pub setup: String,
    /// The test after this plan's own setup.
    pub test: Option<String>,
    /// The test when something else (a devcontainer's commands) set the
    /// project up: the toolchain's usual command, from `PATH`.
    pub plain_test: Option<String>,
}

impl Plan {
    fn new(toolchain: Toolchain, packages: &'static [&'static str], setup: &str) -> Self {
        Plan {
            toolchain,
            packages,
            setup: setup.to_owned(),
            test: None,
            plain_test: None,
        }
    }

    fn tested(mut self, has_tests: bool, own: &str, plain: &str) -> Self {
        if has_tests {
            self.test = Some(own.to_owned());
            self.plain_test = Some(plain.to_owned());
        }
        self
    }
}

/// The toolchains found at the root of `files`, in the table's order.
pub(super) fn detect(files: &dyn RepoFiles) -> Result<Vec<Plan>, FilesError> {
    let mut plans = Vec::new();
    plans.extend(javascript(files)?);
    plans.extend(python(files)?);
    if files.exists("Cargo.lock") || files.exists("Cargo.toml") {
        plans.push(
            Plan::new(Toolchain::Cargo, &["cargo"], "cargo fetch").tested(
                true,
                "cargo test --offline",
                "cargo test --offline",
            ),
        );
    }
    if files.exists("go.mod") {
        plans.push(
            Plan::new(Toolchain::Go, &["golang-go"], "go mod download").tested(
                true,
                "go test ./...",
                "go test ./...",
            ),
        );
    }
    Ok(plans)
}

fn javascript(files: &dyn RepoFiles) -> Result<Option<Plan>, FilesError> {
    const NODE: &[&str] = &["nodejs", "npm"];
    let lock = [
        "pnpm-lock.yaml",
        "yarn.lock",
        "package-lock.json",
        "npm-shrinkwrap.json",
    ]
    .into_iter()
    .find(|path| files.exists(path));
    if lock.is_none() && !files.exists("package.json") {
        return Ok(None);
    }
    // A manifest that does not parse is not detection's to report: the
    // setup's own tool says what is wrong with it, and the agent may be
    // there to fix it.
    let manifest: Option<serde_json::Value> =
        read_text(files, "package.json")?.and_then(|text| serde_json::from_str(&text).ok());
    let has_tests = manifest
        .as_ref()
        .and_then(|manifest| manifest.pointer("/scripts/test"))
        .and_then(serde_json::Value::as_str)
        .map(str::trim)
        .is_some_and(|test| !test.is_empty() && test != NPM_PLACEHOLDER);
    Ok(Some(match lock {
        Some("pnpm-lock.yaml") => {
            let version = pinned_version(manifest.as_ref(), "pnpm")
                .map(|version| format!("@{version}"))
                .unwrap_or_default();
            let setup = format!(
                "npm install --global --prefix \"$HOME/.local\" pnpm{version} && \"$HOME/.local/bin/pnpm\" install --frozen-lockfile"
            );
            Plan::new(Toolchain::Pnpm, NODE, &setup).tested(
                has_tests,
                "\"$HOME/.local/bin/pnpm\" test",
                "pnpm test",
            )
        }
        Some("yarn.lock") => Plan::new(
            Toolchain::Yarn,
            &["nodejs", "yarnpkg"],
            "yarnpkg install --frozen-lockfile",
        )
        .tested(has_tests, "yarnpkg test", "yarnpkg test"),
        Some(_) => {
            Plan::new(Toolchain::Npm, NODE, "npm ci").tested(has_tests, "npm test", "npm test")
        }
        None => {
            Plan::new(Toolchain::Npm, NODE, "npm install").tested(has_tests, "npm test", "npm test")
        }
    }))
}

/// The version `package.json`'s `packageManager` gives `tool`
/// (`"pnpm@9.1.0+sha512.…"` → `9.1.0`), when it is a plain version: it is
/// written into a shell line, so nothing else is taken.
fn pinned_version(manifest: Option<&serde_json::Value>, tool: &str) -> Option<String> {
    let field = manifest?.get("packageManager")?.as_str()?;
    let version = field.strip_prefix(tool)?.strip_prefix('@')?;
    let version = version.split('+').next().unwrap_or(version);
    let plain = version.len() <= 64
        && version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    plain.then(|| version.to_owned())
}

fn python(files: &dyn RepoFiles) -> Result<Option<Plan>, FilesError> {
    const VENV: &[&str] = &["python3-venv"];
    if files.exists("uv.lock") {
        let setup = "python3 -m venv \"$HOME/.uv\" && \"$HOME/.uv/bin/pip\" install uv && UV_PYTHON_DOWNLOADS=never \"$HOME/.uv/bin/uv\" sync --frozen --no-install-project";
        return Ok(Some(Plan::new(Toolchain::Uv, VENV, setup).tested(
            locks_pytest(files, "uv.lock")?,
            ".venv/bin/python -m pytest",
            ".venv/bin/python -m pytest",
        )));
    }
    if files.exists("poetry.lock") {
        let setup = "python3 -m venv \"$HOME/.poetry\" && \"$HOME/.poetry/bin/pip\" install poetry && POETRY_VIRTUALENVS_IN_PROJECT=true \"$HOME/.poetry/bin/poetry\" install --no-interaction --no-root";
        return Ok(Some(Plan::new(Toolchain::Poetry, VENV, setup).tested(
            locks_pytest(files, "poetry.lock")?,
            ".venv/bin/python -m pytest",
            "poetry run python -m pytest",
        )));
    }
    if !files.exists("requirements.txt") {
        return project_plan(files);
    }
    let required = requirement_closure(files, vec!["requirements.txt".into()])?
        .iter()
        .filter_map(|(_, text)| text.as_deref())
        .any(requires_pytest);
    let shows_tests = !required && shows_pytest_tests(files)?;
    let mut setup = String::from(
        "python3 -m venv \"$HOME/.venv\" && \"$HOME/.venv/bin/pip\" install -r requirements.txt",
    );
    if shows_tests {
        setup.push_str(" pytest");
    }
    Ok(Some(
        Plan::new(Toolchain::Pip, &["python3-venv", "python3-pip"], &setup).tested(
            required || shows_tests,
            "\"$HOME/.venv/bin/python\" -m pytest",
            "python3 -m pytest",
        ),
    ))
}

/// An ordinary project's plan ([`python_project`]): its dependencies
/// into `$HOME/.venv` at setup; the project itself, offline, at the start
/// of the test command (its sources are not in the setup's view, and
/// change with every commit).
fn project_plan(files: &dyn RepoFiles) -> Result<Option<Plan>, FilesError> {
    let Some(project) = python_project::project(files)? else {
        return Ok(None);
    };
    let mut requirements: Vec<String> = project.requirements.clone();
    let shows_tests = !project.requires_pytest() && shows_pytest_tests(files)?;
    if shows_tests {
        requirements.push("pytest".into());
    }
    let has_backend = requirements.iter().any(|r| {
        let name = python_project::name_of(r);
        [
            "setuptools",
            "hatchling",
            "poetry-core",
            "flit-core",
            "pdm-backend",
        ]
        .contains(&name.as_str())
    });
    if project.installable && !has_backend {
        // pip's default backend when a project names none.
        requirements.extend(["setuptools".into(), "wheel".into()]);
    }
    if project.hatchling {
        requirements.push("editables".into());
    }
    let mut setup = String::from("python3 -m venv \"$HOME/.venv\"");
    if !requirements.is_empty() {
        setup.push_str(" && \"$HOME/.venv/bin/pip\" install");
        for requirement in &requirements {
            setup.push(' ');
            setup.push_str(&python_project::quote(requirement));
        }
    }
    let mut test = String::from("export PATH=\"$HOME/.venv/bin:$PATH\"");
    if project.installable {
        test.push_str(" && ");
        if project.scm_version {
            // No git directory in the sandbox: a version from version
            // control has nothing to read.
            test.push_str("SETUPTOOLS_SCM_PRETEND_VERSION=0+forgehand ");
        }
        test.push_str("pip install -q --no-deps --no-build-isolation --no-index -e .");
    }
    let commands = if project.tox_commands.is_empty() {
        vec!["python -m pytest".to_owned()]
    } else {
        project.tox_commands.clone()
    };
    for command in &commands {
        test.push_str(" && ");
        test.push_str(command);
    }
    let tested = project.requires_pytest() || shows_tests || !project.tox_commands.is_empty();
    Ok(Some(
        Plan::new(
            Toolchain::PythonProject,
            &["python3-venv", "python3-pip"],
            &setup,
        )
        .tested(tested, &test, "python3 -m pytest"),
    ))
}

/// Whether a uv or Poetry lockfile locks pytest (both write `[[package]]`
/// tables with `name = "pytest"`).
fn locks_pytest(files: &dyn RepoFiles, lock: &str) -> Result<bool, FilesError> {
    Ok(read_text(files, lock)?
        .is_some_and(|text| text.lines().any(|line| line.trim() == "name = \"pytest\"")))
}

/// Whether a requirement file's text requires pytest or a plugin of it
/// (which requires pytest).
fn requires_pytest(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        let name: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
            .map(|c| match c {
                '_' | '.' => '-',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        name == "pytest" || name.starts_with("pytest-")
    })
}

fn shows_pytest_tests(files: &dyn RepoFiles) -> Result<bool, FilesError> {
    if PYTEST_FILES.iter().any(|path| files.exists(path)) {
        return Ok(true);
    }
    for (path, section) in PYTEST_SECTIONS {
        if read_text(files, path)?
            .is_some_and(|text| text.lines().any(|line| line.trim() == section))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
#[path = "detect_tests.rs"]
mod tests;
