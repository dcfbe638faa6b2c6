use super::*;
use crate::spec::testing::MapFiles;
use crate::spec::{declared, Declared, Source};

const NPM_INIT: &str =
    r#"{ "name": "x", "scripts": { "test": "echo \"Error: no test specified\" && exit 1" } }"#;
const WITH_TESTS: &str = r#"{ "name": "x", "scripts": { "test": "node --test" } }"#;

fn detected(files: &MapFiles) -> Declared {
    declared(files, true)
        .unwrap()
        .expect("something is detected")
}

fn names(d: &Declared) -> Vec<&str> {
    d.packages.iter().map(|p| p.as_str()).collect()
}

#[test]
fn npm_with_a_lockfile() {
    let files = MapFiles::new()
        .with("package.json", WITH_TESTS)
        .with("package-lock.json", "{}");
    let d = detected(&files);
    assert_eq!(d.source, Source::Detected(vec![Toolchain::Npm]));
    assert_eq!(names(&d), ["nodejs", "npm"]);
    assert_eq!(d.setup.as_deref(), Some("npm ci"));
    assert_eq!(d.test.as_deref(), Some("npm test"));
    assert_eq!(d.inputs, ["package-lock.json", "package.json"]);
    let shrinkwrap = MapFiles::new()
        .with("package.json", WITH_TESTS)
        .with("npm-shrinkwrap.json", "{}");
    assert_eq!(detected(&shrinkwrap).setup.as_deref(), Some("npm ci"));
}

#[test]
fn npm_without_a_lockfile_installs() {
    let d = detected(&MapFiles::new().with("package.json", WITH_TESTS));
    assert_eq!(d.setup.as_deref(), Some("npm install"));
    assert_eq!(d.inputs, ["package.json"]);
}

#[test]
fn npms_placeholder_test_or_none_is_no_test() {
    for manifest in [
        NPM_INIT,
        "{}",
        r#"{"scripts": {"build": "tsc"}}"#,
        r#"{"scripts": {"test": "  "}}"#,
        r#"{"scripts": {"test": 3}}"#,
        "{ not json",
    ] {
        let files = MapFiles::new()
            .with("package.json", manifest)
            .with("package-lock.json", "{}");
        let d = detected(&files);
        assert_eq!(d.test, None, "{manifest}");
        assert_eq!(d.setup.as_deref(), Some("npm ci"), "{manifest}");
    }
}

#[test]
fn pnpm_is_installed_with_npm_at_the_pinned_version() {
    let files = MapFiles::new()
        .with(
            "package.json",
            r#"{ "packageManager": "pnpm@9.1.0+sha512.abc", "scripts": { "test": "vitest" } }"#,
        )
        .with("pnpm-lock.yaml", "lockfileVersion: '9.0'")
        .with("package-lock.json", "{}");
    let d = detected(&files);
    assert_eq!(d.source, Source::Detected(vec![Toolchain::Pnpm]));
    assert_eq!(names(&d), ["nodejs", "npm"]);
    assert_eq!(
        d.setup.as_deref(),
        Some("npm install --global --prefix \"$HOME/.local\" pnpm@9.1.0 && \"$HOME/.local/bin/pnpm\" install --frozen-lockfile")
    );
    assert_eq!(d.test.as_deref(), Some("\"$HOME/.local/bin/pnpm\" test"));
    // A version that is not plain is not written into the line.
    let files = MapFiles::new()
        .with(
            "package.json",
            r#"{ "packageManager": "pnpm@9; curl x | sh" }"#,
        )
        .with("pnpm-lock.yaml", "");
    let setup = detected(&files).setup.unwrap();
    assert!(
        setup.starts_with("npm install --global --prefix \"$HOME/.local\" pnpm && "),
        "{setup}"
    );
}

#[test]
fn yarn_uses_debians_yarnpkg() {
    let files = MapFiles::new()
        .with("package.json", WITH_TESTS)
        .with("yarn.lock", "");
    let d = detected(&files);
    assert_eq!(d.source, Source::Detected(vec![Toolchain::Yarn]));
    assert_eq!(names(&d), ["nodejs", "yarnpkg"]);
    assert_eq!(
        d.setup.as_deref(),
        Some("yarnpkg install --frozen-lockfile")
    );
    assert_eq!(d.test.as_deref(), Some("yarnpkg test"));
}

#[test]
fn pip_requirements_with_pytest() {
    let files = MapFiles::new()
        .with(
            "requirements.txt",
            "requests==2.31\n-r requirements/test.txt\n",
        )
        .with(
            "requirements/test.txt",
            "# tests\nPyTest_Cov>=4 ; python_version > '3'\n",
        );
    let d = detected(&files);
    assert_eq!(d.source, Source::Detected(vec![Toolchain::Pip]));
    assert_eq!(names(&d), ["python3-pip", "python3-venv"]);
    assert_eq!(
        d.setup.as_deref(),
        Some("python3 -m venv \"$HOME/.venv\" && \"$HOME/.venv/bin/pip\" install -r requirements.txt")
    );
    assert_eq!(
        d.test.as_deref(),
        Some("\"$HOME/.venv/bin/python\" -m pytest")
    );
    assert_eq!(d.inputs, ["requirements.txt", "requirements/test.txt"]);
}

#[test]
fn pip_requirements_without_tests_have_no_test() {
    let files = MapFiles::new().with("requirements.txt", "flask\npytestify-not-this\n# pytest\n");
    let d = detected(&files);
    assert_eq!(d.test, None);
    assert!(!d.setup.unwrap().contains("pytest"));
}

#[test]
fn pytest_tests_without_pytest_required_install_it() {
    for evidence in [
        MapFiles::new().with("tests/conftest.py", ""),
        MapFiles::new().with("pytest.ini", "[pytest]\n"),
        MapFiles::new().with(
            "pyproject.toml",
            "[project]\nname='x'\n\n[tool.pytest.ini_options]\naddopts='-q'\n",
        ),
        MapFiles::new().with("setup.cfg", "[tool:pytest]\n"),
        MapFiles::new().with("tox.ini", "[tox]\n[pytest]\n"),
    ] {
        let files = evidence.with("requirements.txt", "flask\n");
        let d = detected(&files);
        assert_eq!(
            d.setup.as_deref(),
            Some("python3 -m venv \"$HOME/.venv\" && \"$HOME/.venv/bin/pip\" install -r requirements.txt pytest")
        );
        assert_eq!(
            d.test.as_deref(),
            Some("\"$HOME/.venv/bin/python\" -m pytest")
        );
    }
    let unrelated = MapFiles::new().with("requirements.txt", "flask\n").with(
        "pyproject.toml",
        "[tool.black]\n# [tool.pytest.ini_options] in a comment\n",
    );
    assert_eq!(detected(&unrelated).test, None);
}

#[test]
fn uv_and_poetry_are_installed_with_pip() {
    let lock = "[[package]]\nname = \"pytest\"\nversion = \"8.0\"\n";
    let d = detected(
        &MapFiles::new()
            .with("uv.lock", lock)
            .with("pyproject.toml", "")
            .with("requirements.txt", "x"),
    );
    assert_eq!(d.source, Source::Detected(vec![Toolchain::Uv]));
    assert_eq!(names(&d), ["python3-venv"]);
    assert_eq!(
        d.setup.as_deref(),
        Some("python3 -m venv \"$HOME/.uv\" && \"$HOME/.uv/bin/pip\" install uv && UV_PYTHON_DOWNLOADS=never \"$HOME/.uv/bin/uv\" sync --frozen --no-install-project")
    );
    assert_eq!(d.test.as_deref(), Some(".venv/bin/python -m pytest"));
    assert_eq!(d.inputs, ["pyproject.toml", "requirements.txt", "uv.lock"]);

    let d = detected(
        &MapFiles::new()
            .with("poetry.lock", lock)
            .with("pyproject.toml", ""),
    );
    assert_eq!(d.source, Source::Detected(vec![Toolchain::Poetry]));
    assert_eq!(
        d.setup.as_deref(),
        Some("python3 -m venv \"$HOME/.poetry\" && \"$HOME/.poetry/bin/pip\" install poetry && POETRY_VIRTUALENVS_IN_PROJECT=true \"$HOME/.poetry/bin/poetry\" install --no-interaction --no-root")
    );
    assert_eq!(d.test.as_deref(), Some(".venv/bin/python -m pytest"));

    let untested = MapFiles::new().with("poetry.lock", "[[package]]\nname = \"pytest-cov\"\n");
    assert_eq!(detected(&untested).test, None);
}

#[test]
fn cargo_and_go() {
    let d = detected(
        &MapFiles::new()
            .with("Cargo.lock", "")
            .with("Cargo.toml", ""),
    );
    assert_eq!(d.source, Source::Detected(vec![Toolchain::Cargo]));
    assert_eq!(names(&d), ["cargo"]);
    assert_eq!(d.setup.as_deref(), Some("cargo fetch"));
    assert_eq!(d.test.as_deref(), Some("cargo test --offline"));
    assert_eq!(d.inputs, ["Cargo.lock", "Cargo.toml"]);

    let d = detected(
        &MapFiles::new()
            .with("go.mod", "module x")
            .with("go.sum", ""),
    );
    assert_eq!(d.source, Source::Detected(vec![Toolchain::Go]));
    assert_eq!(names(&d), ["golang-go"]);
    assert_eq!(d.setup.as_deref(), Some("go mod download"));
    assert_eq!(d.test.as_deref(), Some("go test ./..."));
    assert_eq!(d.inputs, ["go.mod", "go.sum"]);
    // A go.sum with no go.mod has nothing to download.
    assert_eq!(
        declared(&MapFiles::new().with("go.sum", ""), true).unwrap(),
        None
    );
}

#[test]
fn languages_combine_one_toolchain_each() {
    let files = MapFiles::new()
        .with("package.json", WITH_TESTS)
        .with("yarn.lock", "")
        .with("package-lock.json", "{}")
        .with("requirements.txt", "pytest\n")
        .with("poetry.lock", "")
        .with("go.mod", "module x");
    let d = detected(&files);
    assert_eq!(
        d.source,
        Source::Detected(vec![Toolchain::Yarn, Toolchain::Poetry, Toolchain::Go])
    );
    assert_eq!(
        names(&d),
        ["golang-go", "nodejs", "python3-venv", "yarnpkg"]
    );
    let setup = d.setup.unwrap();
    assert!(
        setup.starts_with("yarnpkg install --frozen-lockfile && python3 -m venv \"$HOME/.poetry\""),
        "{setup}"
    );
    assert!(setup.ends_with(" && go mod download"), "{setup}");
    assert_eq!(d.test.as_deref(), Some("yarnpkg test && go test ./..."));
    assert_eq!(
        d.source.to_string(),
        "detected from the repository's files: Yarn, Poetry, Go modules"
    );
}

#[test]
fn nothing_known_is_nothing_detected() {
    let files = MapFiles::new()
        .with("README.md", "")
        .with("src/package.json", "{}");
    assert_eq!(declared(&files, true).unwrap(), None);
    assert_eq!(declared(&MapFiles::new(), true).unwrap(), None);
}

#[test]
fn detection_reads_are_bounded_and_an_oversized_manifest_detects_less() {
    let files = MapFiles::new()
        .huge("package.json", crate::spec::MAX_DETECT_BYTES + 1)
        .with("package-lock.json", "{}");
    let d = detected(&files);
    assert_eq!(d.setup.as_deref(), Some("npm ci"));
    assert_eq!(d.test, None);
    assert!(files
        .reads()
        .iter()
        .all(|(_, max)| *max <= crate::spec::MAX_DETECT_BYTES));
}

#[test]
fn a_failing_read_is_an_error_not_a_guess() {
    let files = MapFiles::new()
        .broken("package.json")
        .with("package-lock.json", "{}");
    assert!(matches!(
        declared(&files, true),
        Err(crate::spec::DeclareError::Files(FilesError::Read { .. }))
    ));
}

#[test]
fn detected_packages_are_valid_names() {
    let plans = detect(
        &MapFiles::new()
            .with("pnpm-lock.yaml", "")
            .with("requirements.txt", "")
            .with("Cargo.toml", "")
            .with("go.mod", ""),
    )
    .unwrap();
    // Issue 24: with nothing detected the loop below checked nothing and
    // passed.
    assert_eq!(plans.len(), 4, "one plan per toolchain");
    let mut checked = 0;
    for plan in plans {
        assert!(!plan.packages.is_empty(), "each toolchain needs packages");
        for name in plan.packages {
            crate::spec::DebianPackage::new(name).unwrap();
            checked += 1;
        }
    }
    assert!(checked >= 4, "{checked} names checked");
}

/// Issue 26: humanize 4.9.0 declares its dependencies in pyproject.toml
/// only (hatchling, tests as an extra tox.ini names): it was not detected.
#[test]
fn an_ordinary_pyproject_is_detected_with_its_test_extra_and_toxs_command() {
    let files = MapFiles::new()
        .with(
            "pyproject.toml",
            "[build-system]\nbuild-backend = \"hatchling.build\"\nrequires = [\"hatch-vcs\", \"hatchling\"]\n\n\
             [project]\nname = \"humanize\"\n\n[project.optional-dependencies]\ntests = [\"freezegun\", \"pytest\", \"pytest-cov\"]\n",
        )
        .with(
            "tox.ini",
            "[testenv]\nextras =\n    tests\ncommands =\n    {envpython} -m pytest \\\n      --cov humanize \\\n      {posargs}\n",
        )
        .with("src/humanize/__init__.py", "");
    let d = detected(&files);
    assert_eq!(d.source, Source::Detected(vec![Toolchain::PythonProject]));
    assert_eq!(names(&d), ["python3-pip", "python3-venv"]);
    assert_eq!(
        d.setup.as_deref(),
        Some("python3 -m venv \"$HOME/.venv\" && \"$HOME/.venv/bin/pip\" install 'hatch-vcs' 'hatchling' 'freezegun' 'pytest' 'pytest-cov' 'editables'")
    );
    assert_eq!(
        d.test.as_deref(),
        Some("export PATH=\"$HOME/.venv/bin:$PATH\" && SETUPTOOLS_SCM_PRETEND_VERSION=0+forgehand pip install -q --no-deps --no-build-isolation --no-index -e . && python -m pytest --cov humanize")
    );
    assert_eq!(d.inputs, ["pyproject.toml", "tox.ini"]);
}

/// A setup.cfg project with no build system named gets pip's default
/// backend; a project showing pytest tests without requiring pytest gets
/// it.
#[test]
fn a_setup_cfg_project_gets_setuptools_and_pytest() {
    let files = MapFiles::new()
        .with("setup.cfg", "[options]\ninstall_requires =\n    requests\n")
        .with("setup.py", "")
        .with("tests/conftest.py", "");
    let d = detected(&files);
    assert_eq!(
        d.setup.as_deref(),
        Some("python3 -m venv \"$HOME/.venv\" && \"$HOME/.venv/bin/pip\" install 'requests' 'pytest' 'setuptools' 'wheel'")
    );
    assert_eq!(
        d.test.as_deref(),
        Some("export PATH=\"$HOME/.venv/bin:$PATH\" && pip install -q --no-deps --no-build-isolation --no-index -e . && python -m pytest")
    );
    assert_eq!(d.inputs, ["setup.cfg"]);
}

/// A pyproject.toml that only configures tools declares no project.
#[test]
fn a_pyproject_of_tool_settings_only_is_not_a_project() {
    let files = MapFiles::new().with("pyproject.toml", "[tool.ruff]\nline-length = 100\n");
    assert_eq!(declared(&files, true).unwrap(), None);
}
