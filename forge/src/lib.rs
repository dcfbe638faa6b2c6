//! Everything Forgehand knows about forges: which forge sent a delivery,
//! whether its signature holds, the events GitHub's and Gitea/Forgejo's
//! payloads become, the API clients, and the one model of issues, pull
//! requests, comments and people that payloads and API answers share.

pub mod admin;
pub mod api;
pub mod event;
pub mod git;
pub mod model;
pub mod webhook;

pub use event::*;
pub use model::*;
pub use webhook::{parse_delivery, ForgeKind, ParseError};
