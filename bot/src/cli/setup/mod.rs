//! `forgehand setup github|gitea`: what a forge needs before Forgehand can
//! work there, done from the command line with the configured
//! credentials and `server.public_url`.
//!
//! - `setup github` (no `--repo`): the GitHub App manifest flow. A
//!   one-time link to the running server's set-up page is printed; the
//!   App made there is stored and used at once (see `server::setup`).
//! - `setup github --repo OWNER/NAME`, `setup gitea --repo OWNER/NAME |
//!   --org ORG`: the token mode. The token's rights are checked (what is
//!   missing is named), the webhook is created or brought up to date, the
//!   trigger label created when missing, and a test delivery sent that
//!   Forgehand must be seen to answer. Run twice, nothing doubles.

mod app;
mod confirm;
mod token;

use std::io::Write;

pub use app::{setup_github_app, AppArgs};
pub use token::{setup_token_mode, TokenForge};

/// A set-up that cannot go on: said on stderr, exit status 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Stop(pub String);

/// Prints a step's line on stdout, as it happens.
fn step(out: &mut impl Write, line: impl std::fmt::Display) {
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
