use std::os::unix::fs::PermissionsExt;

use forgehand_forge::admin::github::CreatedApp;
use secrecy::{ExposeSecret, SecretString};

use super::*;

fn created() -> CreatedApp {
    CreatedApp {
        id: 31337,
        slug: "forgehand-acme".into(),
        name: "forgehand-acme".into(),
        html_url: "https://github.example/apps/forgehand-acme".into(),
        owner: "acme".into(),
        webhook_secret: Some(SecretString::from("hook-secret-from-github")),
        pem: SecretString::from(
            "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----\n",
        ),
    }
}

#[test]
fn a_saved_app_is_owner_only_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let app_dir = dir.path().join("github-app");
    let saved = save(&app_dir, &created()).unwrap();
    assert_eq!(
        std::fs::metadata(&app_dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for file in ["app.toml", "private-key.pem"] {
        let mode = std::fs::metadata(app_dir.join(file))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{file}");
    }
    let loaded = load(&app_dir).unwrap().unwrap();
    assert_eq!(loaded.id, 31337);
    assert_eq!(loaded.key_path, saved.key_path);
    assert_eq!(
        loaded.webhook_secret.as_ref().unwrap().expose_secret(),
        "hook-secret-from-github"
    );
    assert_eq!(
        loaded.install_url(),
        "https://github.example/apps/forgehand-acme/installations/new"
    );
    assert!(!format!("{loaded:?}").contains("hook-secret"));
}

#[test]
fn files_others_can_read_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), &created()).unwrap();
    std::fs::set_permissions(
        dir.path().join("private-key.pem"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let error = load(dir.path()).unwrap_err();
    assert!(error.contains("readable by others"), "{error}");
}

#[test]
fn the_stored_app_is_adopted_only_without_other_credentials() {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path(), &created()).unwrap();
    let mut github = crate::config::GitHubConfig {
        app_dir: dir.path().to_owned(),
        webhook_secret: vec![SecretString::from("configured")],
        ..Default::default()
    };
    let adopted = adopt(&mut github).unwrap().unwrap();
    assert_eq!(github.app_id, Some(31337));
    assert_eq!(github.private_key_path.as_ref(), Some(&adopted.key_path));
    let secrets: Vec<&str> = github
        .webhook_secret
        .iter()
        .map(|s| s.expose_secret())
        .collect();
    assert_eq!(secrets, ["configured", "hook-secret-from-github"]);
    assert_eq!(shadowed(&github), None);

    let mut with_token = crate::config::GitHubConfig {
        app_dir: dir.path().to_owned(),
        token: Some(SecretString::from("ghp_x")),
        ..Default::default()
    };
    assert!(adopt(&mut with_token).unwrap().is_none());
    assert_eq!(with_token.app_id, None);
    let warning = shadowed(&with_token).unwrap();
    assert!(warning.contains("github.token"), "{warning}");
}
