//! The Forgehand service: configuration, webhook intake, the durable job
//! queue and the operator API. The binary in `main.rs` is a thin CLI over
//! this library so that tests drive the very same router and queue.

pub mod cli;
pub mod command;
pub mod config;
pub mod container;
pub mod github_app;
pub mod host_secrets;
pub mod job;
pub mod live;
pub mod pipeline;
pub mod queue;
pub mod redaction;
pub mod sandboxes;
pub mod server;
pub mod service;
/// The store is a crate of its own; its old path stays.
pub use forgehand_store as store;
pub mod telemetry;
pub mod time;
pub mod trigger;
pub mod webhook_secrets;
