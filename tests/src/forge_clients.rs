//! The two forge clients against their fakes, set up once: a fake forge of
//! either kind with the bot's token, people of each permission on
//! `acme/demo`, issue #1 with a maintainer's comment, and the client the
//! pipeline would use there. `tests/tests/forge_clients.rs` runs what both
//! must do on both; `forge_github.rs` and `forge_gitea.rs` keep what only
//! one forge has (an App's installation token, Gitea's paging).

use forgehand_forge::api::gitea::GiteaClient;
use forgehand_forge::api::github::{GitHubAuth, GitHubClient};
use forgehand_forge::api::{ForgeApi, RepoRef};
use secrecy::SecretString;

use crate::fake_forge::{FakeForge, Kind};

/// The bot's token on the fake GitHub, and on the fake Gitea.
pub const GITHUB_TOKEN: &str = "ghp_fakefakefakefakefakefakefakefake0123";
pub const GITEA_TOKEN: &str = "gitea-bot-token-0123456789";

/// The bot's token on each fake.
pub fn bot_token(kind: Kind) -> &'static str {
    match kind {
        Kind::GitHub => GITHUB_TOKEN,
        Kind::Gitea => GITEA_TOKEN,
    }
}

/// A fake forge of `kind` as the client tests start from.
pub async fn forge_with_an_issue(kind: Kind) -> FakeForge {
    let forge = FakeForge::start(kind).await.unwrap();
    let token = bot_token(kind);
    // The repository's owner: GitHub calls the role `admin`.
    let owner = match kind {
        Kind::GitHub => "admin",
        Kind::Gitea => "owner",
    };
    forge.with(|s| {
        s.tokens.insert(token.into(), "forgehand".into());
        for (user, permission) in [
            ("maintainer", "write"),
            ("owner", owner),
            ("reader", "read"),
        ] {
            s.permissions
                .insert(("acme/demo".into(), user.into()), permission.into());
        }
        s.add_issue(
            "acme/demo",
            "maintainer",
            "Fix the README",
            "The install line is wrong.",
        );
        s.add_comment("acme/demo", 1, "maintainer", "@forgehand fix this please");
        if kind == Kind::Gitea {
            // What `forgehand setup gitea` asks a token to carry.
            s.token_scopes.insert(
                token.into(),
                crate::story::GITEA_SCOPES
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect(),
            );
        }
    });
    forge.api_test_repository("forgehand");
    forge
}

/// The client for `forge`'s kind, signed in with `token`.
pub fn client(forge: &FakeForge, token: &str) -> Box<dyn ForgeApi> {
    match forge.kind() {
        Kind::GitHub => Box::new(
            GitHubClient::new(
                &forge.base_url,
                GitHubAuth::Token(SecretString::from(token)),
            )
            .unwrap(),
        ),
        Kind::Gitea => {
            Box::new(GiteaClient::new(&forge.base_url, SecretString::from(token)).unwrap())
        }
    }
}

/// The repository every client test works on.
pub fn repo() -> RepoRef {
    RepoRef::new("acme", "demo")
}

/// How often the fake was called as `call` (`METHOD /path/{template}`).
pub fn count(forge: &FakeForge, call: &str) -> usize {
    forge.with(|s| s.calls.iter().filter(|c| *c == call).count())
}
