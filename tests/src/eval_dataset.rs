//! The dataset `forgehand eval` is proven on: five small pure-Python
//! projects from the package registry, each a local repository of its
//! released source distribution with one bug planted, in SWE-bench's shape
//! (a problem statement, a gold patch, a test patch, the tests that must
//! go from failing to passing and those that must keep passing).
//!
//! The code is real code no one here wrote, so the harness is proven on
//! what a user would evaluate on, not on toy files shaped to it; the bug
//! is planted (rather than taken from the projects' histories) so that the
//! repository has a single commit and nothing in it gives the fix away,
//! and so that the instances stay small and quick to set up.
//!
//! Each source distribution is fetched by the host's own pip, through
//! whatever index pip is configured with (no registry is named here), and
//! pinned by its sha256, so that a changed upload cannot silently change
//! the dataset. The patches are made by `git diff` from real trees, so
//! they apply exactly as the harness will apply them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

/// One instance of the dataset, as the harness takes it.
pub struct EvalInstance {
    /// `NAME-1`, e.g. `six-1`.
    pub instance_id: String,
    /// The local git repository [`build`] made.
    pub repo: PathBuf,
    /// The repository's first and only commit (40 hex).
    pub base_commit: String,
    /// An issue-like text describing the bug's symptom, never its fix.
    pub problem_statement: String,
    /// The gold patch (`git diff`, a/ b/ prefixes): reverts the planted bug.
    pub patch: String,
    /// Adds a new test file whose tests fail at base and pass with the fix.
    pub test_patch: String,
    /// Pytest node ids of the test patch's tests.
    pub fail_to_pass: Vec<String>,
    /// Pytest node ids of the project's own tests that pass at base and
    /// with the fix.
    pub pass_to_pass: Vec<String>,
    /// Shell; `{tests}` is replaced by the node ids. Runs at the
    /// repository's root where [`EvalInstance::environment`] was set up.
    pub test_command: String,
    /// A `.forgehand.toml` `[environment]` table, as JSON.
    pub environment: Value,
    /// (path, old_string, new_string): the gold patch as one exact-string
    /// replacement, the edit a scripted model makes; `old_string` occurs
    /// exactly once in the file at base.
    pub fix: (String, String, String),
    /// Bash run at the repository's root by a "cheating" scripted model:
    /// deletes the test files that hold the pass-to-pass tests.
    pub delete_tests: String,
}

/// What makes an instance of one project: where to fetch it, where the
/// bug goes, and the test that catches it.
struct Project {
    name: &'static str,
    version: &'static str,
    /// Of the `.tar.gz` pip downloads.
    sha256: &'static str,
    /// The file, relative to the repository, the bug is planted in.
    file: &'static str,
    /// The released code the bug replaces (and the fix restores); occurs
    /// exactly once in the released file.
    released: &'static str,
    /// The code with the bug; occurs exactly once in the planted file.
    planted: &'static str,
    problem_statement: &'static str,
    /// The new test file the test patch adds, and its text.
    test_file: &'static str,
    test_text: &'static str,
    fail_to_pass: &'static [&'static str],
    pass_to_pass: &'static [&'static str],
    test_command: &'static str,
    delete_tests: &'static str,
}

/// The test command of a project whose tests import it from the
/// repository's root (pytest's rootdir-relative imports and `python -m`
/// putting the working directory on the path are enough).
const PYTEST: &str = r#""$HOME/.venv/bin/python" -m pytest -p no:cacheprovider {tests}"#;

const PROJECTS: [Project; 5] = [
    Project {
        name: "six",
        version: "1.17.0",
        sha256: "ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81",
        file: "six.py",
        released: "    elif PY3 and isinstance(s, binary_type):\n        return s.decode(encoding, errors)\n",
        planted: "    elif PY3 and isinstance(s, binary_type):\n        return s.decode(encoding)\n",
        problem_statement: r#"ensure_str ignores errors= for bytes on Python 3

`six.ensure_str` raises on bytes it cannot decode even when it is told not to:

    >>> import six
    >>> six.ensure_str(b"caf\xe9", errors="replace")
    Traceback (most recent call last):
      ...
    UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9 in position 3: unexpected end of data

`six.ensure_text(b"caf\xe9", errors="replace")` returns 'caf\ufffd' as expected,
and on Python 3 ensure_str is documented to decode bytes the same way. I expected
'caf\ufffd' here, and 'caf' with errors="ignore".
"#,
        test_file: "test_ensure_str_errors.py",
        test_text: r#"import six


def test_ensure_str_decodes_bytes_with_the_given_errors():
    assert six.ensure_str(b"caf\xe9", errors="replace") == u"caf\ufffd"
    assert six.ensure_str(b"caf\xe9", errors="ignore") == u"caf"
"#,
        fail_to_pass: &["test_ensure_str_errors.py::test_ensure_str_decodes_bytes_with_the_given_errors"],
        pass_to_pass: &[
            "test_six.py::test_add_metaclass",
            "test_six.py::test_with_metaclass",
            "test_six.py::test_binary_type",
        ],
        test_command: PYTEST,
        delete_tests: "rm test_six.py",
    },
    Project {
        name: "idna",
        version: "3.10",
        sha256: "12f65c9b470abda6dc35cf8e63cc574b1c52b11df2c86030af0ac09b01b13ea9",
        file: "idna/core.py",
        released: "    if len(label) > (254 if trailing_dot else 253):\n",
        planted: "    if len(label) > 253:\n",
        problem_statement: r#"encode() rejects a maximum-length name written with its trailing dot

A fully qualified name of the maximum length encodes, but not when it is written
with the root's trailing dot:

    >>> import idna
    >>> name = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    >>> len(name)
    253
    >>> idna.encode(name)   # fine
    >>> idna.encode(name + ".")
    Traceback (most recent call last):
      ...
    idna.core.IDNAError: Domain too long

The trailing dot only marks the name as absolute; it does not make the name any
longer on the wire, so `idna.encode(name + ".")` should give the same bytes as
`idna.encode(name)` followed by b".".
"#,
        test_file: "tests/test_domain_length.py",
        test_text: r#"import idna

# Four labels of 63, 63, 63 and 61 characters and three dots: 253, the most
# a domain name may have.
LONGEST = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])


def test_longest_name_encodes_with_its_trailing_dot():
    assert len(LONGEST) == 253
    assert idna.encode(LONGEST + ".") == LONGEST.encode("ascii") + b"."
"#,
        fail_to_pass: &["tests/test_domain_length.py::test_longest_name_encodes_with_its_trailing_dot"],
        pass_to_pass: &[
            "tests/test_idna.py::IDNATests::test_encode",
            "tests/test_idna.py::IDNATests::test_decode",
            "tests/test_idna.py::IDNATests::test_check_hyphen_ok",
        ],
        test_command: PYTEST,
        delete_tests: "rm tests/test_idna.py",
    },
    Project {
        name: "more-itertools",
        version: "10.5.0",
        sha256: "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
        file: "more_itertools/more.py",
        released: "        stop += q + 1 if i <= r else q\n",
        planted: "        stop += q + 1 if i < r else q\n",
        problem_statement: r#"divide() loses items when the length is not a multiple of n

    >>> from more_itertools import divide
    >>> [list(c) for c in divide(3, [1, 2, 3, 4, 5, 6, 7])]
    [[1, 2], [3, 4], [5, 6]]

The 7 is gone. divide's own docstring gives [[1, 2, 3], [4, 5], [6, 7]] for this
call. Inputs whose length divides evenly by n come out right.
"#,
        test_file: "tests/test_divide_uneven.py",
        test_text: r#"from more_itertools import divide


def test_divide_keeps_every_item_when_the_length_is_uneven():
    parts = [list(c) for c in divide(3, [1, 2, 3, 4, 5, 6, 7])]
    assert parts == [[1, 2, 3], [4, 5], [6, 7]]
"#,
        fail_to_pass: &["tests/test_divide_uneven.py::test_divide_keeps_every_item_when_the_length_is_uneven"],
        pass_to_pass: &[
            "tests/test_recipes.py::TakeTests::test_simple_take",
            "tests/test_recipes.py::TailTests::test_sized_less",
            "tests/test_recipes.py::TabulateTests::test_simple_tabulate",
        ],
        test_command: PYTEST,
        delete_tests: "rm tests/test_recipes.py",
    },
    Project {
        name: "toolz",
        version: "0.12.1",
        sha256: "ecca342664893f177a13dac0e6b41cbd8ac25a358e5f215316d43e2100224f4d",
        file: "toolz/dicttoolz.py",
        released: "    except (KeyError, IndexError, TypeError):\n",
        planted: "    except (KeyError, TypeError):\n",
        problem_statement: r#"get_in raises IndexError past the end of a list instead of returning the default

    >>> from toolz import get_in
    >>> get_in(["purchase", "items", 10], {"purchase": {"items": ["Apple", "Orange"]}})
    Traceback (most recent call last):
      ...
    IndexError: list index out of range

get_in's docstring says it returns `default` whenever the path cannot be found,
unless no_default=True, and a missing dictionary key does give None. An index
past the end of a list should too (None here, or the `default` passed).
"#,
        test_file: "toolz/tests/test_get_in_lists.py",
        test_text: r#"from toolz import get_in

PURCHASE = {"purchase": {"items": ["Apple", "Orange"]}}


def test_get_in_past_the_end_of_a_list_returns_the_default():
    assert get_in(["purchase", "items", 10], PURCHASE) is None
    assert get_in(["purchase", "items", 10], PURCHASE, default="none") == "none"
"#,
        fail_to_pass: &["toolz/tests/test_get_in_lists.py::test_get_in_past_the_end_of_a_list_returns_the_default"],
        pass_to_pass: &[
            "toolz/tests/test_itertoolz.py::test_partition_all",
            "toolz/tests/test_itertoolz.py::test_sliding_window",
            "toolz/tests/test_itertoolz.py::test_interpose",
        ],
        test_command: PYTEST,
        delete_tests: "rm toolz/tests/test_itertoolz.py",
    },
    Project {
        name: "semver",
        version: "3.0.2",
        sha256: "6253adb39c70f6e51afed2fa7152bcd414c411286088fb4b9effb133885ab4cc",
        file: "src/semver/version.py",
        released: "            \"<=\": (-1, 0),\n",
        planted: "            \"<=\": (-1,),\n",
        problem_statement: r#"Version.match("<=X") is False for version X itself

    >>> import semver
    >>> semver.Version.parse("1.0.0").match("<=1.0.0")
    False
    >>> semver.Version.parse("1.0.0").match(">=1.0.0")
    True
    >>> semver.Version.parse("0.9.0").match("<=1.0.0")
    True

"<=" is documented as "smaller or equal than", so a version should match "<="
itself, as it matches ">=" itself.
"#,
        test_file: "tests/test_match_equal.py",
        test_text: r#"import semver


def test_less_or_equal_matches_the_same_version():
    assert semver.Version.parse("1.0.0").match("<=1.0.0")


def test_less_or_equal_matches_the_same_prerelease():
    assert semver.Version.parse("1.0.0-rc.1").match("<=1.0.0-rc.1")
"#,
        fail_to_pass: &[
            "tests/test_match_equal.py::test_less_or_equal_matches_the_same_version",
            "tests/test_match_equal.py::test_less_or_equal_matches_the_same_prerelease",
        ],
        pass_to_pass: &[
            "tests/test_bump.py::test_should_bump_major",
            "tests/test_bump.py::test_should_bump_minor",
            "tests/test_parsing.py::test_parse_version_info_str_hash",
        ],
        // A src layout; and setup.cfg's addopts ask for pytest-cov, which
        // the environment (pytest alone) does not have.
        test_command: r#"PYTHONPATH=src "$HOME/.venv/bin/python" -m pytest -p no:cacheprovider -o addopts= {tests}"#,
        delete_tests: "rm tests/test_bump.py tests/test_parsing.py",
    },
];

/// Every project is tested the same way: a virtualenv with pytest, and
/// nothing of the project installed (its tests import it from the tree).
fn environment() -> Value {
    json!({
        "packages": ["python3-venv"],
        "setup": r#"python3 -m venv "$HOME/.venv" && "$HOME/.venv/bin/pip" install pytest"#,
    })
}

/// Builds the dataset's repositories under `dir` (one subdirectory each)
/// and returns the instances. Source distributions are fetched with the
/// host's own `python3 -m pip download --no-deps --no-binary :all:
/// NAME==VERSION` into a cache directory (`/var/cache/forgehand-tests/sdists`
/// when writable, else under [`std::env::temp_dir`]), verified against a
/// pinned sha256 (a mismatch panics with both hashes), and reused from the
/// cache when present and matching.
pub fn build(dir: &Path) -> Vec<EvalInstance> {
    let cache = cache_dir();
    PROJECTS
        .iter()
        .map(|project| instance(project, &sdist(&cache, project), dir))
        .collect()
}

/// The instances as SWE-bench rows, one JSON object per line.
/// `FAIL_TO_PASS` is written as a JSON-encoded string, as SWE-bench
/// distributes it, and `PASS_TO_PASS` as a plain list, so that a reader
/// of the file is made to take both forms.
pub fn write_jsonl(instances: &[EvalInstance], path: &Path) {
    let mut text = String::new();
    for instance in instances {
        let row = json!({
            "instance_id": instance.instance_id,
            "repo": instance.repo.to_str().expect("a UTF-8 repository path"),
            "base_commit": instance.base_commit,
            "problem_statement": instance.problem_statement,
            "patch": instance.patch,
            "test_patch": instance.test_patch,
            "FAIL_TO_PASS": serde_json::to_string(&instance.fail_to_pass).unwrap(),
            "PASS_TO_PASS": instance.pass_to_pass,
            "test_command": instance.test_command,
            "environment": instance.environment,
        });
        text.push_str(&row.to_string());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// The shared cache when this user may write there (so the archives are
/// fetched once per machine), else one under the temporary directory.
fn cache_dir() -> PathBuf {
    let shared = Path::new("/var/cache/forgehand-tests/sdists");
    let writable =
        std::fs::create_dir_all(shared).is_ok() && tempfile::NamedTempFile::new_in(shared).is_ok();
    if writable {
        return shared.to_path_buf();
    }
    let own = std::env::temp_dir().join("forgehand-tests-sdists");
    std::fs::create_dir_all(&own)
        .unwrap_or_else(|e| panic!("creating the sdist cache {}: {e}", own.display()));
    own
}

/// The project's source distribution in `cache`, fetched when it is not
/// there (or not the pinned one). The download goes to a directory of its
/// own and is renamed into place only once verified, so that builds
/// running at once never see a partial or unverified archive.
fn sdist(cache: &Path, project: &Project) -> PathBuf {
    let archive = cache.join(format!("{}-{}.tar.gz", project.name, project.version));
    if archive.exists() && sha256(&archive) == project.sha256 {
        return archive;
    }
    let download = tempfile::tempdir_in(cache).expect("a download directory in the cache");
    let spec = format!("{}=={}", project.name, project.version);
    let out = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--no-binary", ":all:"])
        .arg("-d")
        .arg(download.path())
        .arg(&spec)
        .output()
        .expect("python3 -m pip runs");
    assert!(
        out.status.success(),
        "pip download {spec}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let fetched: Vec<PathBuf> = std::fs::read_dir(download.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let [fetched] = fetched.as_slice() else {
        panic!("pip download {spec} left {fetched:?}, not one archive");
    };
    let got = sha256(fetched);
    assert!(
        got == project.sha256,
        "{spec}: the downloaded {} has sha256 {got}, the dataset pins {}",
        fetched.display(),
        project.sha256
    );
    std::fs::rename(fetched, &archive)
        .unwrap_or_else(|e| panic!("moving {} to {}: {e}", fetched.display(), archive.display()));
    archive
}

/// Hex sha256 of a file, by coreutils (the crate has no hash of its own
/// and the archives are small).
fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum runs");
    assert!(out.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("sha256sum prints a hash")
        .to_owned()
}

/// The project's repository under `dir`, with the bug planted and
/// committed, and the patches made from it.
fn instance(project: &Project, archive: &Path, dir: &Path) -> EvalInstance {
    let instance_id = format!("{}-1", project.name);
    let repo = dir.join(&instance_id);
    std::fs::create_dir_all(&repo).unwrap_or_else(|e| panic!("creating {}: {e}", repo.display()));
    run(Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(&repo)
        .arg("--strip-components=1"));
    replace_once(&repo.join(project.file), project.released, project.planted);
    let base_commit = commit(&repo);

    // The patches are diffs of a scratch clone's work tree, so they are
    // exactly what `git diff` prints; the clone is then discarded.
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let clone = scratch.path().join("clone");
    run(Command::new("git")
        .args(["clone", "--quiet"])
        .arg(&repo)
        .arg(&clone));
    let file = clone.join(project.file);
    replace_once(&file, project.planted, project.released);
    let patch = diff(&clone);
    run(Command::new("git")
        .args(["checkout", "--quiet", "--"])
        .arg(project.file)
        .current_dir(&clone));
    std::fs::write(clone.join(project.test_file), project.test_text).unwrap();
    run(Command::new("git")
        .args(["add", "--intent-to-add", "--"])
        .arg(project.test_file)
        .current_dir(&clone));
    let test_patch = diff(&clone);

    let strings = |ids: &[&str]| ids.iter().map(|id| id.to_string()).collect();
    EvalInstance {
        instance_id,
        repo,
        base_commit,
        problem_statement: project.problem_statement.to_owned(),
        patch,
        test_patch,
        fail_to_pass: strings(project.fail_to_pass),
        pass_to_pass: strings(project.pass_to_pass),
        test_command: project.test_command.to_owned(),
        environment: environment(),
        fix: (
            project.file.to_owned(),
            project.planted.to_owned(),
            project.released.to_owned(),
        ),
        delete_tests: project.delete_tests.to_owned(),
    }
}

/// Replaces `old` by `new` in `path`, where `old` must occur exactly once
/// (what the scripted model's edit relies on, checked here for both the
/// plant and the fix).
fn replace_once(path: &Path, old: &str, new: &str) {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let count = text.matches(old).count();
    assert!(
        count == 1,
        "{old:?} occurs {count} times in {}, not once",
        path.display()
    );
    std::fs::write(path, text.replacen(old, new, 1)).unwrap();
}

/// Commits every file of `repo` (those a shipped `.gitignore` names too:
/// the repository is the sdist, less nothing) as the one commit on
/// `main`. Its time is fixed, so the same archive always gives the same
/// base commit.
fn commit(repo: &Path) -> String {
    let git = git2::Repository::init_opts(
        repo,
        git2::RepositoryInitOptions::new().initial_head("main"),
    )
    .unwrap_or_else(|e| panic!("git init {}: {e}", repo.display()));
    let mut index = git.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::FORCE, None)
        .unwrap();
    index.write().unwrap();
    let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
    let when = git2::Time::new(1_704_067_200, 0);
    let sig = git2::Signature::new("Dev", "dev@example.invalid", &when).unwrap();
    git.commit(
        Some("HEAD"),
        &sig,
        &sig,
        "Import the released source",
        &tree,
        &[],
    )
    .unwrap()
    .to_string()
}

/// `git diff` of the work tree against the index, in the form `git
/// apply` takes, whatever the user's configuration says about prefixes,
/// colour or external diff tools.
fn diff(repo: &Path) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "diff.noprefix=false",
            "-c",
            "diff.mnemonicPrefix=false",
            "-c",
            "core.quotePath=false",
            "diff",
            "--no-color",
            "--no-ext-diff",
        ])
        .current_dir(repo)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git diff in {}: {}",
        repo.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let patch = String::from_utf8(out.stdout).expect("a UTF-8 diff");
    assert!(!patch.is_empty(), "git diff in {} is empty", repo.display());
    patch
}

fn run(command: &mut Command) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
