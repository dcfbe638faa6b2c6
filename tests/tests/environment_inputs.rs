//! Issue 26: the setup sees only its inputs. It runs over a view holding
//! the environment's inputs and nothing else of the tree, so whatever a
//! setup does to reach another file (make's rules, Python's module
//! lookup, extension modules and bytecode, `/proc/self/cwd`, a name made
//! at run time) finds nothing; a change to such a file reuses the
//! environment, which provably did not read it. A setup that needs more
//! fails with the hint naming `inputs`, and `inputs` widens the view.
//! And environments are bounded in entries as in bytes.
//!
//! These setups need no network: a setup line and the guest's own tools.

use std::path::Path;

use forgehand_bot::config::Config;
use forgehand_environment::spec::{Declared, EnvKey};
use forgehand_forge::git::Checkouts;
use forgehand_jobcore::environment::{CommitFiles, EnvFailure, Environments, Prepared};
use forgehand_sandbox::namespace::NamespaceBackend;
use forgehand_sandbox::Backend;
use forgehand_tests::rootfs;

/// A commit of `files` on top of `repo`'s HEAD (the first when none).
fn commit(repo: &git2::Repository, files: &[(&str, &str)]) -> git2::Oid {
    let dir = repo.workdir().unwrap().to_owned();
    let mut index = repo.index().unwrap();
    for (path, text) in files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, text).unwrap();
        index.add_path(Path::new(path)).unwrap();
    }
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &parents)
        .unwrap()
}

fn init(dir: &Path) -> git2::Repository {
    git2::Repository::init_opts(dir, git2::RepositoryInitOptions::new().initial_head("main"))
        .unwrap()
}

/// The configuration: no registry (these setups reach none), the cache
/// and checkouts in `dir`, and `extra` settings.
fn config(dir: &Path, extra: &[(&str, &str)]) -> Config {
    let mut env = vec![
        (
            "FORGEHAND_SANDBOX__BACKEND".to_owned(),
            "namespace".to_owned(),
        ),
        (
            "FORGEHAND_SANDBOX__ROOTFS".to_owned(),
            rootfs().display().to_string(),
        ),
        (
            "FORGEHAND_ENVIRONMENT__CACHE_DIR".to_owned(),
            dir.join("envs").display().to_string(),
        ),
    ];
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let file = dir.join("forgehand.toml");
    std::fs::write(&file, "").unwrap();
    Config::load_from(Some(&file), env).unwrap()
}

struct Env {
    dir: tempfile::TempDir,
    repo: git2::Repository,
    config: Config,
    backend: NamespaceBackend,
}

impl Env {
    fn new(extra: &[(&str, &str)]) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let repo = init(&dir.path().join("repo"));
        let config = config(dir.path(), extra);
        Env {
            dir,
            repo,
            config,
            backend: NamespaceBackend::default(),
        }
    }

    fn declare(&self, at: git2::Oid) -> (Declared, EnvKey) {
        let environments =
            Environments::new(&self.config.environment, &self.config.sandbox).unwrap();
        let files = CommitFiles::new(&self.repo, at).unwrap();
        environments
            .declare(&files, "test:acme/app")
            .unwrap()
            .expect("an environment is declared")
    }

    async fn prepare(&self, at: git2::Oid) -> Result<Prepared, EnvFailure> {
        let (declared, key) = self.declare(at);
        let checkouts = Checkouts::new(self.dir.path().join("checkouts"));
        let backend = &self.backend;
        let checkout = checkouts
            .ensure("local/acme/app", &self.repo, at, &|tree: &Path| {
                futures::executor::block_on(backend.prepare_for_sandbox(tree))
                    .map_err(std::io::Error::other)
            })
            .unwrap();
        Environments::new(&self.config.environment, &self.config.sandbox)
            .unwrap()
            .prepare(
                &self.backend,
                "test:acme/app",
                declared,
                key,
                &checkout.tree,
            )
            .await
    }

    /// What is kept and what is being built in the cache.
    fn cache(&self) -> (usize, usize) {
        let count = |sub: &str| {
            std::fs::read_dir(self.dir.path().join("envs").join(sub))
                .map(|d| d.flatten().filter(|e| e.path().is_dir()).count())
                .unwrap_or(0)
        };
        (count("envs"), count("building"))
    }
}

/// The setup tries each way the red-team rounds found a setup reading a
/// file its key did not cover, and writes down what it got.
const PROBING_SETUP: &str = r#"[environment]
setup = '''
s="$HOME/seen"
find /workspace -mindepth 1 | sort > "$s"
(make -C /workspace deps && echo make-ran) >> "$s" 2>&1 || echo make-failed >> "$s"
(cd /workspace && python3 -c 'import tools.x' && echo import-ran) >> "$s" 2>&1 || echo import-failed >> "$s"
(cd /workspace && python3 -c 'import ext' && echo extension-ran) >> "$s" 2>&1 || echo extension-failed >> "$s"
(cd /workspace && python3 -c 'import compiled' && echo bytecode-ran) >> "$s" 2>&1 || echo bytecode-failed >> "$s"
(cd /workspace && cat /proc/self/cwd/secret.txt) >> "$s" 2>&1 || echo cwd-failed >> "$s"
n=secr; (cd /workspace && cat "${n}et.txt") >> "$s" 2>&1 || echo runtime-name-failed >> "$s"
true
'''
"#;

/// What the probing setup finds outside its inputs, each red-team class.
const OUTSIDE: [(&str, &str); 7] = [
    ("Makefile", "deps:\n\techo SECRET-MAKE > made\n"),
    ("tools/__init__.py", ""),
    ("tools/x.py", "print('SECRET-IMPORT')\n"),
    (
        "ext.cpython-311-x86_64-linux-gnu.so",
        "not really an extension\n",
    ),
    (
        "__pycache__/compiled.cpython-311.pyc",
        "not really bytecode\n",
    ),
    ("secret.txt", "SECRET-CONTENT\n"),
    ("calc.py", "def add(a, b):\n    return a + b\n"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_sees_only_its_inputs_and_a_change_outside_them_reuses_it() {
    let env = Env::new(&[]);
    let mut files: Vec<(&str, &str)> = vec![
        (".forgehand.toml", PROBING_SETUP),
        ("requirements.txt", "# nothing to install\n"),
    ];
    files.extend(OUTSIDE);
    let first = commit(&env.repo, &files);
    let (declared, key) = env.declare(first);
    assert_eq!(declared.inputs, ["requirements.txt"]);
    let built = env.prepare(first).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!built.reused);
    let seen = std::fs::read_to_string(built.env.as_ref().unwrap().home().join("seen")).unwrap();
    let listing: Vec<&str> = seen
        .lines()
        .take_while(|l| l.starts_with("/workspace"))
        .collect();
    assert_eq!(listing, ["/workspace/requirements.txt"], "{seen}");
    for failed in [
        "make-failed",
        "import-failed",
        "extension-failed",
        "bytecode-failed",
        "cwd-failed",
        "runtime-name-failed",
    ] {
        assert!(seen.contains(failed), "{failed}: {seen}");
    }
    assert!(!seen.contains("SECRET"), "{seen}");
    assert!(!seen.contains("-ran"), "{seen}");
    drop(built);

    // Every file outside the inputs changes: the same key, reused, and
    // no setup runs.
    let poisoned: Vec<(&str, &str)> = OUTSIDE
        .iter()
        .map(|(path, _)| (*path, "POISONED\n"))
        .collect();
    let second = commit(&env.repo, &poisoned);
    assert_eq!(env.declare(second).1, key);
    let again = env.prepare(second).await.unwrap();
    assert!(again.reused && again.egress.is_none());
    drop(again);

    // An input changes: a new key.
    let third = commit(&env.repo, &[("requirements.txt", "# still nothing\n")]);
    assert_ne!(env.declare(third).1, key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setup_needing_more_fails_with_the_hint_and_inputs_widen_the_view() {
    let env = Env::new(&[]);
    let first = commit(
        &env.repo,
        &[
            (
                ".forgehand.toml",
                "[environment]\nsetup = \"sh tools/install.sh\"\n",
            ),
            ("tools/install.sh", "echo installed > \"$HOME/done\"\n"),
            ("README.md", "an app\n"),
        ],
    );
    let failed = env
        .prepare(first)
        .await
        .expect_err("the script is not in the view");
    let said = failed.to_string();
    assert!(said.contains("tools/install.sh"), "{said}");
    assert!(
        said.contains("the setup saw only the environment's inputs (none of the repository's files): if it needs other files of the repository, add them to `[environment] inputs` in .forgehand.toml"),
        "{said}"
    );
    assert_eq!(env.cache(), (0, 0), "nothing kept, nothing left building");

    let widened = commit(
        &env.repo,
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = \"sh tools/install.sh\"\ninputs = [\"tools/*.sh\"]\n",
        )],
    );
    let (declared, key) = env.declare(widened);
    assert_eq!(declared.inputs, ["tools/install.sh"]);
    let built = env.prepare(widened).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(built.env.as_ref().unwrap().home().join("done").exists());
    drop(built);
    let readme = commit(&env.repo, &[("README.md", "changed\n")]);
    assert_eq!(env.declare(readme).1, key, "README.md is not an input");
    let script = commit(
        &env.repo,
        &[("tools/install.sh", "echo other > \"$HOME/done\"\n")],
    );
    assert_ne!(env.declare(script).1, key, "the script is");
}

/// `environment.max_entries`: a setup making more fails too_large and
/// leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setup_making_more_entries_than_the_limit_is_too_large() {
    let env = Env::new(&[("FORGEHAND_ENVIRONMENT__MAX_ENTRIES", "1000")]);
    let first = commit(
        &env.repo,
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = \"mkdir \\\"$HOME/many\\\" && cd \\\"$HOME/many\\\" && seq 1 1500 | xargs touch\"\n",
        )],
    );
    let failed = env.prepare(first).await.expect_err("too many entries");
    match &failed {
        EnvFailure::Setup(error) => assert!(error.is_too_large(), "{error}"),
        other => panic!("{other}"),
    }
    assert!(
        failed
            .to_string()
            .contains("more than the 1000 files and directories an environment may hold"),
        "{failed}"
    );
    assert_eq!(env.cache(), (0, 0), "nothing kept, nothing left building");
}

/// A setup that runs its file system out of inodes (150,000 empty files
/// took 3 MiB) is too large too, whatever it printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setup_running_out_of_inodes_is_too_large() {
    let env = Env::new(&[("FORGEHAND_ENVIRONMENT__DISK_MIB", "64")]);
    let first = commit(
        &env.repo,
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = \"mkdir \\\"$HOME/many\\\" && cd \\\"$HOME/many\\\" && seq 1 100000 | xargs touch\"\n",
        )],
    );
    let failed = env.prepare(first).await.expect_err("out of inodes");
    match &failed {
        EnvFailure::Setup(error) => assert!(error.is_too_large(), "{error}"),
        other => panic!("{other}"),
    }
    assert!(
        failed
            .to_string()
            .contains("ran its file system out of inodes"),
        "{failed}"
    );
    assert_eq!(env.cache(), (0, 0));
}

/// Node's module lookup (`require('./lib')`, a package under
/// `node_modules/`) finds nothing outside the inputs either; a change to
/// those files reuses the environment. Node comes from Debian's archive
/// through the egress, so this one reaches the registries this host's
/// package managers use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_finds_nothing_outside_the_inputs_and_a_change_there_reuses_it() {
    let proposal = forgehand_environment::hosts::propose().await;
    let hosts = proposal.allow_hosts().join(",");
    assert!(!hosts.is_empty(), "no registry on this host: {proposal}");
    let env = Env::new(&[
        ("FORGEHAND_ENVIRONMENT__ALLOW_HOSTS", hosts.as_str()),
        (
            "FORGEHAND_ENVIRONMENT__CA_BUNDLE",
            "/etc/ssl/certs/ca-certificates.crt",
        ),
    ]);
    let setup = r#"[environment]
packages = ["nodejs"]
setup = '''
s="$HOME/seen"
(cd /workspace && node -e "require('./lib')" && echo local-ran) >> "$s" 2>&1 || echo local-failed >> "$s"
(cd /workspace && node -e "require('helper')" && echo package-ran) >> "$s" 2>&1 || echo package-failed >> "$s"
true
'''
"#;
    let first = commit(
        &env.repo,
        &[
            (".forgehand.toml", setup),
            ("lib/index.js", "console.log('SECRET-LOCAL')\n"),
            (
                "node_modules/helper/index.js",
                "console.log('SECRET-PACKAGE')\n",
            ),
        ],
    );
    let (_, key) = env.declare(first);
    let built = env.prepare(first).await.unwrap_or_else(|e| panic!("{e}"));
    let seen = std::fs::read_to_string(built.env.as_ref().unwrap().home().join("seen")).unwrap();
    assert!(seen.contains("local-failed"), "{seen}");
    assert!(seen.contains("package-failed"), "{seen}");
    assert!(!seen.contains("SECRET") && !seen.contains("-ran"), "{seen}");
    drop(built);
    let second = commit(
        &env.repo,
        &[
            ("lib/index.js", "POISONED\n"),
            ("node_modules/helper/index.js", "POISONED\n"),
        ],
    );
    assert_eq!(env.declare(second).1, key);
    let again = env.prepare(second).await.unwrap();
    assert!(again.reused && again.egress.is_none());
}
