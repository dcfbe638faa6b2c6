//! Everything Forgehand knows about forges: which forge sent a delivery,
//! whether its signature holds, and the one event model that GitHub's and
//! Gitea/Forgejo's payloads both become.

pub mod api;
pub mod event;
pub mod git;
pub mod webhook;

pub use event::*;
pub use webhook::{parse_delivery, ForgeKind, ParseError};
