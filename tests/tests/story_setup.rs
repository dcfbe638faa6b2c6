//! Setting Forgehand up on a forge as a new user would, against the fake
//! forges and the real `forgehand serve`: the GitHub App manifest flow
//! from `forgehand setup github` to a pull request by the App it made (no
//! restart in between), and the token mode's `forgehand setup gitea` /
//! `setup github --repo` recording the webhook and the label, answering
//! the test delivery, changing nothing when run twice, and naming what a
//! token lacks.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use forgehand_tests::fake_forge::hooks::HookScope;
use forgehand_tests::fake_forge::{Kind, APP_BOT};
use forgehand_tests::project::{good_script, TOKEN};
use forgehand_tests::story::{only, Story, BOT, REPO};
use insta::{allow_duplicates, assert_snapshot};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An HTML attribute's value, unescaped: the first `name="…"` after `after`.
fn attribute(html: &str, after: &str, name: &str) -> String {
    let from = html
        .find(after)
        .unwrap_or_else(|| panic!("no {after} in {html}"));
    let start = from + html[from..].find(&format!("{name}=\"")).unwrap() + name.len() + 2;
    let end = start + html[start..].find('"').unwrap();
    html[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// A browser that follows no redirect by itself.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn header(response: &reqwest::Response, name: impl reqwest::header::AsHeaderName) -> String {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Reads `forgehand setup github`'s output until the link; returns it and
/// the lines so far.
fn the_link(child: &mut std::process::Child) -> (String, Vec<String>) {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no link printed: {lines:#?}"));
        lines.push(line.clone());
        if let Some(at) = line.find("http") {
            if line.contains("/setup/github?link=") {
                // The rest of the output is read after the CLI exits.
                std::thread::spawn(move || while rx.recv().is_ok() {});
                return (line[at..].trim().to_owned(), lines);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_github_app_made_from_the_manifest_works_at_once_for_a_labeled_issue() {
    let mut story = Story::start_unwired(Kind::GitHub, good_script(), &[], true).await;
    let base = story.base().to_owned();
    let mut cli = story.spawn_cli(&["setup", "github"]);
    let (link, _) = the_link(&mut cli);
    assert!(
        link.starts_with(&format!("{base}/setup/github?link=")),
        "{link}"
    );

    let web = browser();
    // The link opens a session and leaves the address bar at once.
    let opened = web.get(&link).send().await.unwrap();
    assert_eq!(opened.status(), 303);
    assert_eq!(header(&opened, LOCATION), "/setup/github");
    assert_eq!(header(&opened, "referrer-policy"), "no-referrer");
    assert_eq!(header(&opened, "cache-control"), "no-store");
    let cookie = header(&opened, SET_COOKIE);
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_owned();
    // It works once.
    let again = web.get(&link).send().await.unwrap();
    assert_eq!(again.status(), 403);
    // Without the session, the page only offers to sign in.
    let anonymous = web
        .get(format!("{base}/setup/github"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!anonymous.contains("name=\"manifest\""), "{anonymous}");

    // A state GitHub did not bring back is refused, and a callback
    // without the session too.
    let page = web
        .get(format!("{base}/setup/github"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let forged = web
        .get(format!(
            "{base}/setup/github/callback?code=abc&state=forged"
        ))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    let sessionless = web
        .get(format!("{base}/setup/github/callback?code=abc&state=x"))
        .send()
        .await
        .unwrap();
    assert_eq!(sessionless.status(), 403);

    // The page's form posts the manifest to GitHub with a state.
    let html = web
        .get(format!("{base}/setup/github"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let action = attribute(&html, "<form", "action");
    let settings = format!("{}/settings/apps/new?state=", story.forge.base_url);
    assert!(action.starts_with(&settings), "{action}");
    let state = action[settings.len()..].to_owned();
    let manifest = attribute(&html, "name=\"manifest\"", "value");
    let sent: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(
        sent["hook_attributes"]["url"],
        format!("{base}/webhooks/github")
    );
    assert_eq!(
        sent["redirect_url"],
        format!("{base}/setup/github/callback")
    );

    // GitHub makes the App and sends the browser back.
    let created = web
        .post(&action)
        .form(&[("manifest", manifest.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 302, "{}", created.text().await.unwrap());
    let back = header(&created, LOCATION);
    assert!(
        back.starts_with(&format!("{base}/setup/github/callback?code=")),
        "{back}"
    );
    assert!(back.ends_with(&format!("&state={state}")), "{back}");
    let done = web.get(&back).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(done.status(), 200);
    let done = done.text().await.unwrap();
    let install = format!("{}/apps/forgehand/installations/new", story.forge.base_url);
    assert!(done.contains(&install), "{done}");
    // The code is good once.
    let replay = web.get(&back).header(COOKIE, &cookie).send().await.unwrap();
    assert_eq!(replay.status(), 403);

    // The command saw it, and says where to install it.
    let out = tokio::task::spawn_blocking(move || cli.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(web.get(&install).send().await.unwrap().status(), 200);

    // The App's identity is stored for the owner alone.
    let app_dir = story.dir().join("forgehand-data/github-app");
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
    let (app_id, app_secret) = story.forge.with(|s| {
        assert_eq!(s.manifest_apps.len(), 1);
        let app = &s.manifest_apps[0];
        assert!(app.converted);
        (app.id, app.webhook_secret.clone())
    });
    let stored = std::fs::read_to_string(app_dir.join("app.toml")).unwrap();
    assert!(stored.contains(&format!("id = {app_id}")), "{stored}");
    assert!(
        !story.log().contains(&app_secret),
        "the webhook secret was logged"
    );

    // Installed, the App works for a labeled issue: no restart.
    story.forge.install_app(app_id, REPO);
    story
        .forge
        .with(|s| s.installation_token = Some(TOKEN.into()));
    story.bot_login = APP_BOT.into();
    story.label(1).await;
    let jobs = story.settled().await;
    assert_eq!(
        only(&jobs, "labeled")["state"],
        "succeeded",
        "{jobs:#?}\n{}",
        story.log()
    );
    let pulls = story.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:#?}");
    assert_eq!(pulls[0].user, APP_BOT);
    assert!(story.status(1).starts_with("✅ Opened #2: "));
    let labeled = story.forge.deliveries();
    let labeled: Vec<_> = labeled.iter().filter(|d| d.event == "issues").collect();
    assert_eq!(labeled.len(), 1, "only the App's hook hears the repository");
    assert_eq!(
        labeled[0].status,
        Some(202),
        "signed with the App's secret, accepted"
    );
    assert!(story.forge.with(|s| !s.issued_tokens.is_empty()));

    // Running it again changes nothing.
    let again = story.cli(&["setup", "github"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("already signs in as the GitHub App"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(story.forge.with(|s| s.manifest_apps.len()), 1);
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

/// `setup gitea --repo` (or `setup github --repo`) with a token that may
/// do it, twice: one hook, one label, the test delivery answered each
/// time; then a labeled issue reaches Forgehand through that hook.
async fn the_token_mode_wires_a_repository_once(kind: Kind) {
    let story = Story::start_unwired(kind, good_script(), &[], false).await;
    story.forge.with(|s| {
        s.permissions
            .insert((REPO.into(), BOT.into()), "admin".into());
        if kind == Kind::GitHub {
            s.token_scopes.insert(TOKEN.into(), vec!["repo".into()]);
        }
    });
    let (command, family, test_event) = match kind {
        Kind::GitHub => ("github", "github", "ping"),
        Kind::Gitea => ("gitea", "gitea", "push"),
    };
    let hook_url = format!("{}/webhooks/{family}", story.base());
    // Before: doctor finds the token good but the repository unwired.
    let before = story.cli(&["doctor", "--repo", REPO]);
    let report = text(&before.stdout);
    assert_eq!(before.status.code(), Some(1), "{report}");
    assert!(
        report.contains(&format!("{family:<18} ok: a token of forgehand")),
        "{report}"
    );
    assert!(
        report.contains(&format!("no webhook to {hook_url} on acme/demo")),
        "{report}"
    );
    assert!(
        report.contains("no label `forgehand` on acme/demo"),
        "{report}"
    );
    for run in 1..=2 {
        let out = story.cli(&["setup", command, "--repo", REPO]);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "run {run}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("Forgehand answered the test delivery"),
            "{stdout}"
        );
        let (hook, label) = if run == 1 {
            ("created", "created")
        } else {
            ("updated", "already there")
        };
        assert!(
            stdout.contains(&format!("→ {hook_url}: {hook}")),
            "run {run}: {stdout}"
        );
        assert!(
            stdout.contains(&format!("Label `forgehand`: {label}")),
            "run {run}: {stdout}"
        );
        let hooks = story.forge.with(|s| s.webhooks.api_hooks());
        assert_eq!(hooks.len(), 1, "run {run}: {hooks:#?}");
        let (scope, url, events, active) = &hooks[0];
        assert_eq!(scope, &HookScope::Repo(REPO.into()));
        assert_eq!(url, &hook_url);
        assert!(active);
        for event in ["issues", "issue_comment", "pull_request"] {
            assert!(events.iter().any(|e| e == event), "{events:?}");
        }
        let labels = story.forge.with(|s| s.labels.clone());
        assert_eq!(labels.len(), 1, "run {run}: {labels:#?}");
        assert_eq!(labels[0].name, "forgehand");
        story.forge.settle().await;
        let tests: Vec<_> = story
            .forge
            .deliveries()
            .into_iter()
            .filter(|d| d.event == test_event)
            .collect();
        assert_eq!(tests.len(), run, "one test delivery a run");
        // The second is the first's body again: answered 200 as a
        // duplicate (a real forge's second test differs in its times).
        let answered = tests[run - 1]
            .status
            .is_some_and(|s| (200..300).contains(&s));
        assert!(answered, "{:?}", tests[run - 1]);
    }
    allow_duplicates!(
        assert_snapshot!(story.labels(), @"forgehand #5319e7: Ask Forgehand to work on this issue")
    );
    let secret = story.forge.with(|s| {
        let id = s.webhooks.deliveries[0].hook_id;
        s.webhooks.secret_of(id)
    });
    assert_eq!(secret.as_deref(), Some(story.webhook_secret()));
    let after = story.cli(&["doctor", "--repo", REPO]);
    let report = text(&after.stdout);
    assert_eq!(after.status.code(), Some(0), "{report}");
    assert!(
        report.contains(&format!("{hook_url} is registered on acme/demo")),
        "{report}"
    );
    assert!(
        report.contains("`forgehand` exists on acme/demo"),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "public url         ok: {}/healthz answers",
            story.base()
        )),
        "{report}"
    );

    story.label(1).await;
    let jobs = story.settled().await;
    assert_eq!(only(&jobs, "labeled")["state"], "succeeded", "{jobs:#?}");
    assert_eq!(story.pulls().len(), 1);
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_gitea_records_the_hook_and_the_label_and_twice_changes_nothing() {
    the_token_mode_wires_a_repository_once(Kind::Gitea).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_github_repo_records_the_hook_and_the_label_and_twice_changes_nothing() {
    the_token_mode_wires_a_repository_once(Kind::GitHub).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_gitea_names_what_the_token_lacks_and_changes_nothing() {
    let story = Story::start_unwired(Kind::Gitea, good_script(), &[], false).await;
    // A collaborator with write access only.
    story.forge.with(|s| {
        s.permissions
            .insert((REPO.into(), BOT.into()), "write".into());
    });
    let out = story.cli(&["setup", "gitea", "--repo", REPO]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("admin access to acme/demo for forgehand"),
        "{stderr}"
    );

    // An administrator's token without the scope to write hooks.
    story.forge.with(|s| {
        s.permissions
            .insert((REPO.into(), BOT.into()), "admin".into());
        let scopes = ["read:user", "read:repository", "write:issue"];
        s.token_scopes
            .insert(TOKEN.into(), scopes.map(String::from).to_vec());
    });
    let out = story.cli(&["setup", "gitea", "--repo", REPO]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("[write:repository]"), "{stderr}");
    assert!(story.forge.with(|s| s.webhooks.api_hooks().is_empty()));

    // Without read:user, that is named first.
    story.forge.with(|s| {
        s.token_scopes
            .insert(TOKEN.into(), vec!["write:repository".into()]);
    });
    let out = story.cli(&["setup", "gitea", "--repo", REPO]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("read:user"), "{stderr}");
    assert!(story
        .forge
        .with(|s| s.webhooks.api_hooks().is_empty() && s.labels.is_empty()));
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_github_names_a_missing_scope_and_admin_rights() {
    let story = Story::start_unwired(Kind::GitHub, good_script(), &[], false).await;
    story.forge.with(|s| {
        s.permissions
            .insert((REPO.into(), BOT.into()), "write".into());
        s.token_scopes
            .insert(TOKEN.into(), vec!["public_repo".into()]);
    });
    let out = story.cli(&["setup", "github", "--repo", REPO]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the scope `repo` (this classic token has: public_repo)"),
        "{stderr}"
    );
    assert!(stderr.contains("admin access to acme/demo"), "{stderr}");
    assert!(story
        .forge
        .with(|s| s.webhooks.api_hooks().is_empty() && s.labels.is_empty()));
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_gitea_for_an_organization_makes_its_hook_and_label_once() {
    let story = Story::start_unwired(Kind::Gitea, good_script(), &[], false).await;
    story.forge.with(|s| {
        s.permissions
            .insert(("acme".into(), BOT.into()), "owner".into());
    });
    // A token without write:organization is told so by the forge's own
    // words, and nothing is made.
    let out = story.cli(&["setup", "gitea", "--org", "acme"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("[write:organization]"),
        "{}",
        text(&out.stderr)
    );
    assert!(story.forge.with(|s| s.webhooks.api_hooks().is_empty()));
    story.forge.with(|s| {
        s.token_scopes
            .get_mut(forgehand_tests::project::TOKEN)
            .unwrap()
            .push("write:organization".into());
    });
    for run in 1..=2 {
        let out = story.cli(&["setup", "gitea", "--org", "acme"]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
        assert!(
            stdout.contains("Gitea has no test delivery for an organization's webhook"),
            "{stdout}"
        );
        let hooks = story.forge.with(|s| s.webhooks.api_hooks());
        assert_eq!(hooks.len(), 1, "run {run}");
        assert_eq!(hooks[0].0, HookScope::Org("acme".into()));
        assert_eq!(story.forge.with(|s| s.labels.len()), 1, "run {run}");
    }
    assert_snapshot!(story.labels(), @"forgehand #5319e7: Ask Forgehand to work on this issue");
    // The organization's hook hears its repositories.
    story.label(1).await;
    let jobs = story.settled().await;
    assert_eq!(only(&jobs, "labeled")["state"], "succeeded", "{jobs:#?}");
    assert_eq!(story.forge.violations(), Vec::<String>::new());
}
