//! Subcommands beyond `serve`: what operators run by hand.

mod doctor;
pub mod run;
mod sandbox_exec;

pub use doctor::doctor;
pub use sandbox_exec::{sandbox_exec, SandboxExecArgs};
