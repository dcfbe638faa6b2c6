//! Shared pieces of the end-to-end suite.

pub mod api_spec;
pub mod fake_forge;
pub mod git_http;
pub mod git_ssh;
pub mod gitea_events;
pub mod harness;
pub mod model_server;
pub mod testdata;
