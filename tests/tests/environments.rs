//! Environments built for real: a repository's declared (or detected)
//! setup run in the setup sandbox through the egress proxy against the
//! package registries this machine reaches, whose hosts come from the
//! host's own package managers (`forgehand env hosts`), never from a file
//! of the project. Then kept, and found again without running setup.

use std::path::Path;

use forgehand_bot::config::Config;
use forgehand_environment::hosts;
use forgehand_forge::git::Checkouts;
use forgehand_jobcore::environment::{CommitFiles, Environments};
use forgehand_sandbox::namespace::NamespaceBackend;
use forgehand_sandbox::Backend;
use forgehand_tests::rootfs;

/// A repository with these files, committed on `main`; returns it and
/// the commit.
fn repository(dir: &Path, files: &[(&str, &str)]) -> (git2::Repository, git2::Oid) {
    let repo =
        git2::Repository::init_opts(dir, git2::RepositoryInitOptions::new().initial_head("main"))
            .unwrap();
    let mut index = repo.index().unwrap();
    for (path, text) in files {
        let full = dir.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, text).unwrap();
        index.add_path(Path::new(path)).unwrap();
    }
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
    let commit = repo
        .commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
        .unwrap();
    drop(tree);
    (repo, commit)
}

/// The configuration of these tests: the allow-list proposed from this
/// host's package managers, the host's CA bundle (the registries here are
/// behind a gateway whose certificates a fresh guest does not trust).
async fn config(dir: &Path) -> Config {
    let proposal = hosts::propose().await;
    let hosts = proposal.allow_hosts();
    assert!(
        !hosts.is_empty(),
        "no package registry found in this host's pip, npm or apt configuration: {proposal}"
    );
    let env = [
        ("FORGEHAND_SANDBOX__BACKEND", "namespace".to_owned()),
        ("FORGEHAND_SANDBOX__ROOTFS", rootfs().display().to_string()),
        ("FORGEHAND_ENVIRONMENT__ALLOW_HOSTS", hosts.join(",")),
        (
            "FORGEHAND_ENVIRONMENT__CA_BUNDLE",
            "/etc/ssl/certs/ca-certificates.crt".to_owned(),
        ),
        (
            "FORGEHAND_ENVIRONMENT__CACHE_DIR",
            dir.join("envs").display().to_string(),
        ),
        (
            "FORGEHAND_ENVIRONMENT__SETUP_TIMEOUT_SECS",
            "900".to_owned(),
        ),
    ];
    let file = dir.join("forgehand.toml");
    std::fs::write(&file, "").unwrap();
    Config::load_from(
        Some(&file),
        env.iter().map(|(k, v)| (k.to_string(), v.clone())),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_environment_is_built_through_the_egress_and_then_reused() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, commit) = repository(
        &dir.path().join("repo"),
        &[
            ("requirements.txt", "iniconfig==2.0.0\n"),
            ("calc.py", "def add(a, b):\n    return a + b\n"),
        ],
    );
    let config = config(dir.path()).await;
    let environments = Environments::new(&config.environment, &config.sandbox).unwrap();
    let backend = NamespaceBackend::default();
    let files = CommitFiles::new(&repo, commit).unwrap();
    let (declared, key) = environments
        .declare(&files, "test:acme/calc")
        .unwrap()
        .expect("requirements.txt is detected");
    assert!(declared
        .setup
        .as_deref()
        .unwrap()
        .contains("install -r requirements.txt"));
    let checkouts = Checkouts::new(dir.path().join("checkouts"));
    let checkout = checkouts
        .ensure("local/acme/calc", &repo, commit, &|tree: &Path| {
            futures::executor::block_on(backend.prepare_for_sandbox(tree))
                .map_err(std::io::Error::other)
        })
        .unwrap();
    let built = environments
        .prepare(
            &backend,
            "test:acme/calc",
            declared.clone(),
            key.clone(),
            &checkout.tree,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!built.reused);
    let env = built.env.as_ref().unwrap();
    let venv = env.home().join(".venv/lib");
    let installed = walk_names(&venv);
    assert!(
        installed.iter().any(|n| n.starts_with("iniconfig")),
        "iniconfig is in the environment's venv: {installed:?}"
    );
    let egress = built.egress.as_ref().unwrap();
    assert!(
        egress.records.iter().any(|r| r.connections > 0),
        "{egress:?}"
    );
    assert!(
        egress.refused().next().is_none(),
        "nothing refused: {egress:?}"
    );
    // The proxy's load: pip's few connections, each name looked up once
    // for every connection that wanted it.
    assert!(egress.load.peak_connections >= 1, "{egress}");
    assert!(egress.load.lookups >= 1, "{egress}");
    assert_eq!(egress.load.lookups_failed, 0, "{egress}");
    assert_eq!(egress.load.waited, 0, "{egress}");
    let steps: Vec<&str> = built.steps.iter().map(|step| step.name).collect();
    assert_eq!(steps, ["packages", "command", "keep"], "{:?}", built.steps);
    // The base commit is untouched: setup writes above it.
    assert!(!checkout.tree.join(".venv").exists());
    drop(built);

    let again = environments
        .prepare(&backend, "test:acme/calc", declared, key, &checkout.tree)
        .await
        .unwrap();
    assert!(again.reused, "the second job finds it kept");
    assert!(again.egress.is_none(), "and runs no setup");
}

fn walk_names(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            names.push(entry.file_name().to_string_lossy().into_owned());
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) && names.len() < 10_000 {
                pending.push(entry.path());
            }
        }
    }
    names
}

/// `forgehand env build --repo` with `envs` added to a clean
/// environment; returns its exit status and output.
fn env_build(dir: &Path, repo: &Path, envs: &[(&str, String)]) -> (bool, String) {
    let out = std::process::Command::new(forgehand_tests::story::forgehand_binary())
        .args(["env", "build", "--repo"])
        .arg(repo)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("FORGEHAND_SANDBOX__BACKEND", "namespace")
        .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
        .env("FORGEHAND_GIT__WORK_DIR", dir.join("jobs"))
        .env("FORGEHAND_ENVIRONMENT__CACHE_DIR", dir.join("envs"))
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("the forgehand binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// What `env_build` needs to reach the package registries: the
/// allow-list proposed from this host's package managers, and the host's
/// CA bundle (see [`config`]).
async fn registry_env() -> Vec<(&'static str, String)> {
    let proposal = hosts::propose().await;
    let hosts = proposal.allow_hosts();
    assert!(
        !hosts.is_empty(),
        "no package registry found in this host's pip, npm or apt configuration: {proposal}"
    );
    vec![
        ("FORGEHAND_ENVIRONMENT__ALLOW_HOSTS", hosts.join(",")),
        (
            "FORGEHAND_ENVIRONMENT__CA_BUNDLE",
            "/etc/ssl/certs/ca-certificates.crt".to_owned(),
        ),
    ]
}

/// Everything in `dir`'s cache: what is kept (environments and their
/// lock files), then what is being built.
fn kept_and_building(dir: &Path) -> (Vec<String>, Vec<String>) {
    let names = |sub: &str| -> Vec<String> {
        std::fs::read_dir(dir.join("envs").join(sub))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    (names("envs"), names("building"))
}

/// The home of the one environment kept in `dir`.
fn kept_home(dir: &Path) -> std::path::PathBuf {
    let envs: Vec<_> = std::fs::read_dir(dir.join("envs/envs"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert_eq!(envs.len(), 1, "one environment kept");
    envs[0].path().join("home")
}

/// The setup phase holds nothing of the host's: no host variable, no
/// forge token, no model key; and its door reaches neither the host's
/// loopback (directly it is the sandbox's own; through the proxy it is
/// refused, even for a name the operator allowed, since it resolves to a
/// loopback address) nor a host the operator did not allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_phase_reaches_no_host_service_and_holds_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    // A service on the host's loopback: it must never see a connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let setup = format!(
        "env | sort > $HOME/env.txt; \
         (curl -sS --max-time 5 http://127.0.0.1:{port}/direct; echo \"direct=$?\") > $HOME/probe.txt 2>&1; \
         (curl -sS --max-time 5 --noproxy '' -x http://127.0.0.1:3128 http://localhost:{port}/proxied; echo \" proxied=$?\") >> $HOME/probe.txt 2>&1; \
         (curl -sS --max-time 5 --noproxy '' -x http://127.0.0.1:3128 -p https://localhost:{port}/tunnelled; echo \" tunnelled=$?\") >> $HOME/probe.txt 2>&1; \
         (curl -sS --max-time 5 --noproxy '' -x http://127.0.0.1:3128 http://not-allowed.invalid/; echo \" elsewhere=$?\") >> $HOME/probe.txt 2>&1; \
         (curl -sS --max-time 5 --noproxy '' -x http://127.0.0.1:3128 http://localhost/ranged; echo \" ranged=$?\") >> $HOME/probe.txt 2>&1; \
         true"
    );
    let repo = dir.path().join("repo");
    repository(
        &repo,
        &[(
            ".forgehand.toml",
            &format!("[environment]\nsetup = '''{setup}'''\n"),
        )],
    );
    let canaries = [
        (
            "FORGEHAND_MODEL__API_KEY",
            "sk-canary-model-key-0123456789".to_owned(),
        ),
        (
            "FORGEHAND_GITHUB__TOKEN",
            "ghp_canaryforgetoken0123456789abcdef".to_owned(),
        ),
        (
            "FORGEHAND_GITHUB__WEBHOOK_SECRET",
            "canary-webhook-secret".to_owned(),
        ),
        ("CANARY_HOST_VARIABLE", "canary-host-value".to_owned()),
        ("FORGEHAND_ENVIRONMENT__ALLOW_HOSTS", "localhost".to_owned()),
    ];
    let (ok, said) = tokio::task::block_in_place(|| env_build(dir.path(), &repo, &canaries));
    assert!(ok, "{said}");
    let home = kept_home(dir.path());
    let env = std::fs::read_to_string(home.join("env.txt")).unwrap();
    for (_, canary) in &canaries[..4] {
        assert!(
            !env.contains(canary.as_str()),
            "{canary} reached the setup:\n{env}"
        );
    }
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    for name in &names {
        assert!(
            [
                "HOME",
                "PATH",
                "LANG",
                "USER",
                "TERM",
                "HTTPS_PROXY",
                "HTTP_PROXY",
                "https_proxy",
                "http_proxy",
                "NO_PROXY",
                "no_proxy",
                "PWD",
                "SHLVL",
                "_"
            ]
            .contains(name),
            "{name} in the setup's environment:\n{env}"
        );
    }
    let probe = std::fs::read_to_string(home.join("probe.txt")).unwrap();
    for tried in ["direct", "tunnelled"] {
        let code = probe
            .split(&format!("{tried}="))
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no {tried} probe: {probe}"));
        assert_ne!(code, "0", "{tried} got through: {probe}");
    }
    assert!(
        probe.contains("loopback"),
        "the refusal names the range: {probe}"
    );
    assert!(probe.contains("not in environment.allow_hosts"), "{probe}");
    assert!(
        listener.accept().is_err(),
        "the host's service saw a connection from the setup"
    );
}

/// A declaration with a mistake says where and what was expected, and
/// nothing is built.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistaken_declaration_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    repository(
        &repo,
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = \"true\"\npackages = \"nodejs\"\n",
        )],
    );
    let (ok, said) = tokio::task::block_in_place(|| env_build(dir.path(), &repo, &[]));
    assert!(!ok, "{said}");
    assert!(said.contains("environment:declaration"), "{said}");
    assert!(said.contains("line 3"), "{said}");
    assert!(said.contains("expected a list"), "{said}");
}

/// The environment is what the base commit declares: a `.forgehand.toml`
/// changed in the working tree (as an agent's change would be) does not
/// change what the setup runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_is_the_committed_declarations_not_the_working_trees() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    repository(
        &repo,
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = \"echo committed > $HOME/which\"\n",
        )],
    );
    std::fs::write(
        repo.join(".forgehand.toml"),
        "[environment]\nsetup = \"echo changed > $HOME/which\"\n",
    )
    .unwrap();
    let (ok, said) = tokio::task::block_in_place(|| env_build(dir.path(), &repo, &[]));
    assert!(ok, "{said}");
    let which = std::fs::read_to_string(kept_home(dir.path()).join("which")).unwrap();
    assert_eq!(which, "committed\n");
}

/// A declared Debian package is downloaded through the egress and
/// extracted into the environment's layer over the guest image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_debian_package_is_extracted_into_the_layer() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    repository(
        &repo,
        &[(
            ".forgehand.toml",
            "[environment]\npackages = [\"hello\"]\nsetup = \"hello > $HOME/said\"\n",
        )],
    );
    let env = registry_env().await;
    let (ok, said) = tokio::task::block_in_place(|| env_build(dir.path(), &repo, &env));
    assert!(ok, "{said}");
    let home = kept_home(dir.path());
    let layer = home.parent().unwrap().join("rootfs");
    assert!(layer.join("usr/bin/hello").is_file(), "{said}");
    assert_eq!(
        std::fs::read_to_string(home.join("said")).unwrap(),
        "Hello, world!\n"
    );
}

/// Red-team F4: a name in Debian's grammar can still be an apt pattern
/// (`cowsay.+` installed `cowsay-off`) or an action (`hello-` asks apt
/// to remove `hello`). A name must be one apt knows exactly; the others
/// are named, the repository's error, and nothing is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_name_apt_would_read_as_a_pattern_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    repository(
        &repo,
        &[(
            ".forgehand.toml",
            "[environment]\npackages = [\"hello\", \"cowsay.+\", \"hello-\"]\nsetup = \"true\"\n",
        )],
    );
    let env = registry_env().await;
    let (ok, said) = tokio::task::block_in_place(|| env_build(dir.path(), &repo, &env));
    assert!(!ok, "{said}");
    assert!(said.contains("environment:setup"), "{said}");
    assert!(
        said.contains("no package named `cowsay.+`, `hello-`"),
        "{said}"
    );
    assert!(!said.contains("cowsay-off"), "{said}");
    assert_eq!(
        kept_and_building(dir.path()),
        (vec![], vec![]),
        "nothing kept, not even a lock file, nothing left: {said}"
    );
}

/// A setup that fails because a host is not allowed says which: the
/// client's own message seldom names the host ("returned error: 403"), so
/// the failure lists what the egress proxy refused, escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_setup_names_the_hosts_the_proxy_refused() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    repository(
        &repo,
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = \"curl -fsS --max-time 5 http://not-on-the-list.invalid/simple/ -o /dev/null\"\n",
        )],
    );
    let env = [("FORGEHAND_ENVIRONMENT__ALLOW_HOSTS", "localhost".to_owned())];
    let (ok, said) = tokio::task::block_in_place(|| env_build(dir.path(), &repo, &env));
    assert!(!ok, "{said}");
    assert!(said.contains("environment:setup"), "{said}");
    let refused = said
        .split("the egress proxy refused")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of what the proxy refused: {said}"));
    assert!(
        refused.contains("not-on-the-list.invalid:80")
            && refused.contains("not in environment.allow_hosts"),
        "{said}"
    );
}

/// Red-team F5: a setup that leaves a tree deeper than the host's paths
/// can hold (5,000 nested directories) made the host's copy into the
/// cache fail as Forgehand's own fault (`infra`, retried), with the whole
/// path in the log. It is the repository's (`environment:setup`), named
/// with the path cut short; nothing is left: no build directory, mount or
/// loop device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_too_deep_to_keep_is_the_repositorys_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    repository(
        &repo,
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = '''python3 -c \"import os\nfor i in range(5000): os.mkdir('d'); os.chdir('d')\"'''\n",
        )],
    );
    let (ok, said) = tokio::task::block_in_place(|| env_build(dir.path(), &repo, &[]));
    assert!(!ok, "{said}");
    assert!(said.contains("environment:setup"), "{said:.2000}");
    assert!(
        said.contains("/workspace/d/d/d/") && said.contains("a path longer than"),
        "{said:.2000}"
    );
    assert!(
        said.lines().all(|line| line.len() < 1000),
        "the path is cut short: {said:.2000}"
    );
    assert_eq!(
        kept_and_building(dir.path()),
        (vec![], vec![]),
        "nothing kept, not even a lock file, nothing left: {said:.2000}"
    );
    let root = dir.path().to_string_lossy().into_owned();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&root), "left mounted:\n{mounts}");
    for entry in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let backing = entry.path().join("loop/backing_file");
        if let Ok(file) = std::fs::read_to_string(&backing) {
            assert!(
                !file.contains(&root),
                "{} still backs {file}",
                entry.path().display()
            );
        }
    }
}

/// A kept environment is reused until its key changes, and built again
/// once it is older than `environment.max_age_hours`: what a setup reads
/// without naming it is current again at least that often.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_environment_past_its_age_is_built_again() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    repository(
        &repo,
        &[(
            ".forgehand.toml",
            "[environment]\nsetup = \"date +%s%N > $HOME/built\"\n",
        )],
    );
    let envs = [("FORGEHAND_ENVIRONMENT__ALLOW_HOSTS", "localhost".to_owned())];
    let build = || {
        let (ok, said) = tokio::task::block_in_place(|| env_build(dir.path(), &repo, &envs));
        assert!(ok, "{said}");
        said
    };
    let first = build();
    assert!(first.contains("set up in"), "{first}");
    // Each step's time: no packages are declared, so no packages step.
    assert!(first.contains("\n  command "), "{first}");
    assert!(first.contains("\n  keep "), "{first}");
    assert!(!first.contains("\n  packages "), "{first}");
    let stamp = std::fs::read_to_string(kept_home(dir.path()).join("built")).unwrap();
    let again = build();
    assert!(again.contains("kept already"), "{again}");
    // Eight days pass (the kept environment's record says when it was
    // built; the default age is seven days).
    let info_path = kept_home(dir.path()).parent().unwrap().join("info.json");
    let mut info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&info_path).unwrap()).unwrap();
    let built_at = info["built_at"].as_u64().unwrap();
    info["built_at"] = (built_at - 8 * 24 * 3600).into();
    std::fs::write(&info_path, info.to_string()).unwrap();
    let aged = build();
    assert!(aged.contains("set up in"), "built again: {aged}");
    let restamp = std::fs::read_to_string(kept_home(dir.path()).join("built")).unwrap();
    assert_ne!(stamp, restamp, "the setup ran again");
}
