use std::io::Write;

use secrecy::ExposeSecret;

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn defaults_match_the_documented_contract() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.toml");
    std::fs::write(&path, "").unwrap();
    let c = Config::load_from(Some(&path), env(&[])).unwrap();
    assert_eq!(c.server.listen, "127.0.0.1:8080");
    // Relative paths are the working directory's, made absolute at load.
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(
        c.database.url,
        format!("sqlite://{}/forgehand.db", cwd.display())
    );
    let data = cwd.join("forgehand-data");
    assert_eq!(c.server.data_dir, data);
    assert_eq!(c.git.mirror_dir, data.join("mirrors"));
    assert_eq!(c.git.work_dir, data.join("jobs"));
    assert_eq!(c.agent.transcript_dir, data.join("transcripts"));
    assert_eq!(c.environment.cache_dir, data.join("environments"));
    assert_eq!(c.github.app_dir, data.join("github-app"));
    assert_eq!(c.bot.label, "forgehand");
    assert_eq!(c.bot.username, "forgehand");
    assert_eq!(c.server.max_body_bytes, 25 * 1024 * 1024);
    assert!(c.github.webhook_secret.is_empty());
    assert!(c.api.token.is_none());
}

#[test]
fn environment_overrides_the_file_and_splits_secret_lists() {
    let f = file("[github]\nwebhook_secret = [\"from-file\"]\n[queue]\nworkers = 3\n");
    let c = Config::load_from(
        Some(f.path()),
        env(&[
            ("FORGEHAND_GITHUB__WEBHOOK_SECRET", "new, old"),
            ("FORGEHAND_QUEUE__WORKERS", "0"),
            ("FORGEHAND_API__TOKEN", "t0k"),
            ("FORGEHAND_CONFIG", "ignored: names the file, not a key"),
            ("FORGEHAND_BIN", "ignored: not FORGEHAND_<SECTION>__<KEY>"),
            ("OTHER_VAR", "ignored"),
        ]),
    )
    .unwrap();
    let secrets: Vec<&str> = c
        .github
        .webhook_secret
        .iter()
        .map(|s| s.expose_secret())
        .collect();
    assert_eq!(secrets, ["new", "old"]);
    assert_eq!(c.queue.workers, 0);
    assert_eq!(c.api.token.unwrap().expose_secret(), "t0k");
}

#[test]
fn a_list_in_the_file_is_a_rotation_set() {
    let f = file("[gitea]\nwebhook_secret = [\"a\", \"b\"]\n");
    let c = Config::load_from(Some(f.path()), env(&[])).unwrap();
    assert_eq!(c.gitea.webhook_secret.len(), 2);
}

#[test]
fn errors_name_the_key_and_the_problem() {
    let f = file("[server]\nlisten = \"not an address\"\n[queue]\nmax_attempts = 0\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("server.listen: `not an address` is not an address"),
        "{err}"
    );
    assert!(
        err.contains("queue.max_attempts: must be at least 1"),
        "{err}"
    );

    let f = file("[queue]\nworkers = \"many\"\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("workers"), "{err}");

    let err = Config::load_from(None, env(&[("FORGEHAND_QUEUE__WORKRS", "1")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("workrs"), "{err}");

    let f = file("[bot]\nlabl = \"typo\"\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("labl"), "{err}");

    let err = Config::load_from(
        None,
        env(&[("FORGEHAND_DATABASE__URL", "mysql://u:pw@db/x")]),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("database.url"), "{err}");
    assert!(
        !err.contains("pw"),
        "the password leaked into an error: {err}"
    );
}

/// The PostgreSQL URL's password is a secret: `check-config` shows the
/// URL without it, and it is one of the host's secrets (filtered from
/// logs, looked for in what the agent changed), as written and decoded.
#[test]
fn a_postgres_password_is_redacted_and_kept_secret() {
    use secrecy::ExposeSecret;
    let c = Config::load_from(
        None,
        env(&[(
            "FORGEHAND_DATABASE__URL",
            "postgres://forgehand:s3cr%40t-pw@db.internal:5432/forgehand?sslmode=require",
        )]),
    )
    .unwrap();
    assert_eq!(
        c.database.kind(),
        Some(crate::config::DatabaseKind::Postgres)
    );
    let shown = c.to_redacted_toml();
    assert!(!shown.contains("s3cr"), "{shown}");
    assert!(
        shown.contains("url = \"postgres://<credentials redacted>@db.internal:5432/forgehand?sslmode=require\""),
        "{shown}"
    );
    let mut secrets: Vec<String> = crate::host_secrets::host_secrets(&c)
        .into_iter()
        .filter(|(name, _)| name == "database.url")
        .map(|(_, s)| s.expose_secret().to_owned())
        .collect();
    secrets.sort();
    assert_eq!(secrets, ["s3cr%40t-pw", "s3cr@t-pw"]);
    let err = Config::load_from(None, env(&[("FORGEHAND_DATABASE__POOL_SIZE", "0")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("database.pool_size: must be at least 1"),
        "{err}"
    );
}

#[test]
fn a_missing_file_named_explicitly_is_an_error() {
    let err =
        Config::load_from(Some(Path::new("/nonexistent/forgehand.toml")), env(&[])).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/forgehand.toml"));
}

#[test]
fn redacted_output_never_shows_a_secret() {
    let c = Config::load_from(
        None,
        env(&[
            ("FORGEHAND_GITHUB__WEBHOOK_SECRET", "hunter2,hunter3"),
            ("FORGEHAND_GITEA__WEBHOOK_SECRET", "gitea-s3cret"),
            ("FORGEHAND_API__TOKEN", "api-s3cret"),
        ]),
    )
    .unwrap();
    let shown = c.to_redacted_toml();
    for secret in ["hunter2", "hunter3", "gitea-s3cret", "api-s3cret"] {
        assert!(!shown.contains(secret), "{secret} in:\n{shown}");
        assert!(
            !format!("{c:?}").contains(secret),
            "{secret} in Debug output"
        );
    }
    assert!(shown.contains("<redacted>"));
    assert!(shown.contains("listen = \"127.0.0.1:8080\""));
}

#[test]
fn sandbox_keys_have_documented_defaults_and_environment_overrides() {
    let c = Config::load_from(None, env(&[])).unwrap();
    assert_eq!(c.sandbox.backend, forgehand_sandbox::BackendChoice::Auto);
    assert_eq!(c.sandbox.rootfs, Path::new(DEFAULT_ROOTFS));
    assert_eq!(c.sandbox.limits(), forgehand_sandbox::Limits::default());

    let c = Config::load_from(
        None,
        env(&[
            ("FORGEHAND_SANDBOX__BACKEND", "namespace"),
            ("FORGEHAND_SANDBOX__ROOTFS", "/srv/guest"),
            ("FORGEHAND_SANDBOX__MEMORY_MIB", "512"),
            ("FORGEHAND_SANDBOX__MAX_PIDS", "64"),
            ("FORGEHAND_SANDBOX__TIMEOUT_SECS", "30"),
            ("FORGEHAND_SANDBOX__OUTPUT_LIMIT_BYTES", "4096"),
        ]),
    )
    .unwrap();
    assert_eq!(
        c.sandbox.backend,
        forgehand_sandbox::BackendChoice::Namespace
    );
    let spec = c.sandbox.spec(Path::new("/jobs/1"));
    assert_eq!(spec.rootfs, Path::new("/srv/guest"));
    assert_eq!(spec.workspace, Path::new("/jobs/1"));
    assert_eq!(spec.limits.memory_mib, 512);
    assert_eq!(spec.limits.max_pids, 64);
    assert_eq!(spec.limits.timeout.as_secs(), 30);
    assert_eq!(spec.limits.output_limit_bytes, 4096);
    assert_eq!(spec.env["HOME"], "/tmp");
}

#[test]
fn sandbox_errors_name_the_key() {
    let err = Config::load_from(None, env(&[("FORGEHAND_SANDBOX__BACKEND", "docker")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("docker") && err.contains("namespace"), "{err}");

    let f = file("[sandbox]\nmemory_mib = 8\n[sandbox.env]\n\"BAD-NAME\" = \"x\"\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sandbox.memory_mib: must be at least 64"),
        "{err}"
    );
    assert!(
        err.contains("sandbox.env: `BAD-NAME` is not a variable name"),
        "{err}"
    );
}

#[test]
fn git_keys_have_defaults_and_errors_name_the_key() {
    let c = Config::load_from(None, env(&[])).unwrap();
    assert_eq!(c.git.branch_prefix(), "forgehand/");
    assert_eq!(
        c.git.branch_for(12, "Fix the README"),
        "forgehand/12-fix-the-readme"
    );
    assert!(!c.git.policy_for("acme/demo").allow_sensitive);

    let c = Config::load_from(
        None,
        env(&[
            ("FORGEHAND_GIT__BRANCH_PATTERN", "bots/fh/{slug}-{number}"),
            ("FORGEHAND_GIT__ALLOW_SENSITIVE", "Acme/Infra, acme/tools"),
        ]),
    )
    .unwrap();
    assert_eq!(c.git.branch_prefix(), "bots/fh/");
    assert!(c.git.policy_for("acme/tools").allow_sensitive);
    let f = file(
        "[git]\nbranch_pattern = \"bots/fh/{slug}-{number}\"\nallow_sensitive = [\"Acme/Infra\"]\n",
    );
    let c = Config::load_from(Some(f.path()), env(&[])).unwrap();
    assert_eq!(c.git.branch_prefix(), "bots/fh/");
    assert_eq!(c.git.branch_for(3, "x y"), "bots/fh/x-y-3");
    assert!(c.git.policy_for("acme/infra").allow_sensitive);
    assert!(!c.git.policy_for("acme/other").allow_sensitive);

    let f = file("[git]\nbranch_pattern = \"{number}-{slug}\"\nallow_sensitive = [\"just-a-name\"]\nssh_key_path = \"/keys/id\"\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    for expected in [
        "git.branch_pattern: `{number}-{slug}` must start with a fixed directory",
        "git.allow_sensitive: `just-a-name` is not `owner/name` or `*`",
        "git.known_hosts_path: SSH needs both",
    ] {
        assert!(err.contains(expected), "{expected} in {err}");
    }
    let f = file("[git]\nbranch_pattern = \"forgehand/{slug}\"\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("must contain {number}"), "{err}");
}

// octocrab's client starts a background task: it needs a runtime.
#[tokio::test]
async fn forge_api_keys_point_forgehand_at_any_server() {
    let c = Config::load_from(None, env(&[])).unwrap();
    assert_eq!(c.github.api_url, "https://api.github.com");
    assert!(
        c.github.client().is_none() && c.gitea.client().is_none(),
        "no credentials, no client"
    );

    let c = Config::load_from(
        None,
        env(&[
            (
                "FORGEHAND_GITHUB__API_URL",
                "https://ghe.example.com/api/v3",
            ),
            ("FORGEHAND_GITHUB__TOKEN", "ghp_not-a-real-token-000"),
            ("FORGEHAND_GITEA__BASE_URL", "https://gitea.example.com"),
            ("FORGEHAND_GITEA__TOKEN", "gitea-not-real-000"),
        ]),
    )
    .unwrap();
    assert!(c.github.client().unwrap().is_ok());
    assert!(c.gitea.client().unwrap().is_ok());
    let shown = c.to_redacted_toml();
    assert!(
        !shown.contains("ghp_not-a-real") && !shown.contains("gitea-not-real"),
        "{shown}"
    );

    let f = file("[github]\napp_id = 12\ntoken = \"x\"\n[gitea]\nbase_url = \"https://gitea.example.com/api/v1\"\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    for expected in [
        "github.private_key_path: a GitHub App needs both",
        "github.token: set either a token or a GitHub App",
        "gitea.base_url: `https://gitea.example.com/api/v1` is the API",
        "gitea.token: the Gitea API needs both",
    ] {
        assert!(err.contains(expected), "{expected} in {err}");
    }
    let f = file("[github]\napp_id = 12\nprivate_key_path = \"/nonexistent/key.pem\"\n");
    let c = Config::load_from(Some(f.path()), env(&[])).unwrap();
    let error = c.github.client().unwrap().err().unwrap().to_string();
    assert!(
        error.contains("github.private_key_path: cannot read /nonexistent/key.pem"),
        "{error}"
    );
}

#[test]
fn co_authors_get_their_own_forges_no_reply_address() {
    use forgehand_forge::ForgeKind;
    let config = Config::load_from(
        None,
        env(&[
            ("FORGEHAND_GITEA__BASE_URL", "https://git.example.org:3000/"),
            ("FORGEHAND_GITEA__TOKEN", "gitea-token"),
        ]),
    )
    .unwrap();
    assert_eq!(
        config.co_author_email(ForgeKind::Github, "octocat"),
        "octocat@users.noreply.github.com"
    );
    assert_eq!(
        config.co_author_email(ForgeKind::Gitea, "alice"),
        "alice@noreply.git.example.org"
    );
    assert_eq!(
        config.co_author_email(ForgeKind::Forgejo, "bob"),
        "bob@noreply.git.example.org"
    );

    let enterprise = Config::load_from(
        None,
        env(&[("FORGEHAND_GITHUB__API_URL", "https://ghe.acme.test/api/v3")]),
    )
    .unwrap();
    assert_eq!(
        enterprise.co_author_email(ForgeKind::Github, "carol"),
        "carol@users.noreply.ghe.acme.test"
    );
}

/// Red-team round 3, M3: `max_age_hours = 0.4` was read as 0 ("never
/// built again"), silently; every whole-number key rounded a fraction so.
#[test]
fn a_fraction_where_a_whole_number_is_expected_is_refused_by_key() {
    let f = file(
        "[environment]\nmax_age_hours = 0.4\n[queue]\nlease_secs = 2.5\n\
         [agent]\nmax_dollars = 2.5\n",
    );
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("environment.max_age_hours: expected a whole number, got 0.4"),
        "{err}"
    );
    assert!(
        err.contains("queue.lease_secs: expected a whole number, got 2.5"),
        "{err}"
    );
    assert!(
        !err.contains("max_dollars"),
        "a price may have cents: {err}"
    );
    // The same through the environment, where every value is a string.
    let err = Config::load_from(
        None,
        env(&[("FORGEHAND_ENVIRONMENT__MAX_AGE_HOURS", "1.5")]),
    )
    .map(|c| c.environment.max_age_hours)
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("environment.max_age_hours") && err.contains("1.5"),
        "{err}"
    );
    // Whole numbers, written either way, are whole numbers.
    let f = file("[environment]\nmax_age_hours = 24.0\n[agent]\nmax_dollars = 2.5\n");
    let c = Config::load_from(Some(f.path()), env(&[])).unwrap();
    assert_eq!(c.environment.max_age_hours, 24);
    assert_eq!(c.agent.max_dollars, 2.5);
}

/// Red-team round 3, M3: a huge `max_age_hours` passed check-config and
/// then overflowed when turned into a duration.
#[test]
fn max_age_hours_is_bounded_and_its_duration_cannot_overflow() {
    let f = file("[environment]\nmax_age_hours = 5124095576030432\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("environment.max_age_hours: at most"), "{err}");
    let f = file("[environment]\nmax_age_hours = 100000\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("environment.max_age_hours: at most 87600"),
        "{err}"
    );
    let c = EnvironmentConfig {
        max_age_hours: u64::MAX,
        ..EnvironmentConfig::default()
    };
    assert!(c.max_age().is_some());
}

/// Red-team round 4, F3: `nan` was read as 0 ("never"), and a huge
/// size passed check-config, then panicked in the sandbox (a multiply
/// overflow) or failed as Forgehand's own fault. Every whole-number key
/// refuses what is not a whole number, and sizes past what a machine
/// has.
#[test]
fn not_a_number_and_huge_values_are_refused_by_key() {
    let f = file(
        "[environment]\nmax_age_hours = nan\nmemory_mib = 9223372036854775807\n\
         [sandbox]\ndisk_mib = 9223372036854775807\n[queue]\nworkers = 9223372036854775807\n",
    );
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    for expected in [
        "environment.max_age_hours: expected a whole number, got nan or inf",
        "environment.memory_mib: at most 16777216",
        "sandbox.disk_mib: at most 16777216",
        "queue.workers: at most 1099511627776",
    ] {
        assert!(err.contains(expected), "{expected}:\n{err}");
    }
    let err = Config::load_from(
        None,
        env(&[("FORGEHAND_SANDBOX__MEMORY_MIB", "99999999999")]),
    )
    .map(|c| c.sandbox.memory_mib)
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("sandbox.memory_mib: at most 16777216"),
        "{err}"
    );
    // The defaults are in range.
    Config::load_from(None, env(&[])).unwrap();
}

/// Red-team round 5, N3: values the kernel's cgroups refuse passed
/// check-config, then failed every job as Forgehand's own fault.
#[test]
fn sandbox_limits_past_the_kernels_are_refused_by_key() {
    let f = file("[sandbox]\nvcpus = 4294967295\nmax_pids = 4194305\n");
    let err = Config::load_from(Some(f.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("sandbox.vcpus: at most 1024"), "{err}");
    assert!(err.contains("sandbox.max_pids: at most 4194304"), "{err}");
    let f = file("[sandbox]\nvcpus = 1024\nmax_pids = 4194304\n");
    Config::load_from(Some(f.path()), env(&[])).unwrap();
}

/// Issue 24, finding 1: the default relative `git.work_dir` reached
/// libgit2 relative, and the checkouts the agent saw were empty. Every
/// path is absolute once loaded; data paths left unset go beneath
/// `server.data_dir`, which with no configuration file is the user's
/// state directory, never the working directory.
#[test]
fn every_path_is_absolute_and_data_goes_where_the_file_or_its_absence_says() {
    let cwd = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let home_env = vec![("HOME".to_owned(), home.path().display().to_string())];
    let places = Places::new(cwd.path().to_owned(), false, &home_env);
    let c = Config::load_in(None, home_env.clone(), &places).unwrap();
    let state = home.path().join(".local/state/forgehand");
    assert_eq!(c.server.data_dir, state);
    assert_eq!(c.git.work_dir, state.join("jobs"));
    assert_eq!(c.environment.cache_dir, state.join("environments"));
    assert!(c.data_inside(cwd.path()).is_empty());

    let f = file("[server]\ndata_dir = \"data\"\n[git]\nwork_dir = \"../elsewhere/jobs\"\n[agent]\nprompts_dir = \"prompts\"\n[sandbox]\nrootfs = \"guest\"\n");
    let places = Places::new(cwd.path().join("sub"), true, &home_env);
    let c = Config::load_in(Some(f.path()), home_env, &places).unwrap();
    assert_eq!(c.server.data_dir, cwd.path().join("sub/data"));
    assert_eq!(c.git.mirror_dir, cwd.path().join("sub/data/mirrors"));
    assert_eq!(
        c.git.work_dir,
        cwd.path().join("elsewhere/jobs"),
        "set: relative to the working directory"
    );
    assert_eq!(
        c.agent.prompts_dir.as_deref(),
        Some(cwd.path().join("sub/prompts").as_path())
    );
    assert_eq!(c.sandbox.rootfs, cwd.path().join("sub/guest"));
    // Data inside the repository `run` works on is named.
    let inside = c.data_inside(&cwd.path().join("sub"));
    let keys: Vec<&str> = inside.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "git.mirror_dir",
            "agent.transcript_dir",
            "environment.cache_dir"
        ]
    );
}

/// Issue 24, finding 7: `check-config` printed unset secrets as
/// `token = ""`, which reads as set.
#[test]
fn unset_secrets_are_left_out_of_the_printed_configuration() {
    let c = Config::load_from(None, env(&[("FORGEHAND_API__TOKEN", "api-secret-value")])).unwrap();
    let shown = c.to_redacted_toml();
    assert!(!shown.contains("token = \"\""), "{shown}");
    assert!(shown.contains("token = \"<redacted>\""), "{shown}");
    assert!(!shown.contains("api-secret-value"), "{shown}");
}

/// docs/configuration.md names every key the configuration knows (its
/// defaults, serialised), and no key it does not: the reference cannot
/// drift from the types. A key holding a table of the operator's own
/// names is written `section.key.<name>` there.
#[test]
fn the_reference_documents_every_key_and_only_known_keys() {
    let docs = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/configuration.md"
    ));
    let known: std::collections::BTreeSet<String> = keys::known()
        .into_iter()
        .flat_map(|(section, keys)| {
            keys.into_iter()
                .map(move |(key, _)| format!("{section}.{key}"))
        })
        .collect();
    // The first cell of each row of the reference's tables: the keys it
    // describes, each in backquotes.
    let mut documented = std::collections::BTreeSet::new();
    for line in docs.lines() {
        let Some(cell) = line
            .strip_prefix("| `")
            .map(|rest| rest.split(" | ").next())
        else {
            continue;
        };
        let cell = format!("`{}", cell.unwrap_or_default());
        for quoted in cell.split('`').skip(1).step_by(2) {
            let key = quoted.strip_suffix(".<name>").unwrap_or(quoted);
            if key.contains('.') && !key.contains(' ') {
                documented.insert(key.to_owned());
            }
        }
    }
    let missing: Vec<_> = known.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&known).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "not in docs/configuration.md: {missing:?}; documented but unknown: {unknown:?}"
    );
}

/// `environment.max_connections` reaches the egress's policy, within its
/// bounds; the default is the egress's own.
#[test]
fn the_egress_connection_limit_is_configurable_and_bounded() {
    let c = Config::load_from(None, env(&[])).unwrap();
    assert_eq!(
        c.environment.egress().unwrap().limits.max_connections,
        forgehand_environment::egress::Limits::default().max_connections
    );
    let f = file("[environment]\nmax_connections = 32\n");
    let c = Config::load_from(Some(f.path()), env(&[])).unwrap();
    assert_eq!(c.environment.egress().unwrap().limits.max_connections, 32);
    for bad in ["0", "4097"] {
        let f = file(&format!("[environment]\nmax_connections = {bad}\n"));
        let err = Config::load_from(Some(f.path()), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("environment.max_connections: from 1 to 4096"),
            "{bad}: {err}"
        );
    }
}
