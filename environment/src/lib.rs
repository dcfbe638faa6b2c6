//! A repository's environment: what the agent needs to build and test the
//! project it works on, installed once and then kept.
//!
//! * [`spec`]: what a repository declares (`.forgehand.toml`'s
//!   `[environment]`, else `.devcontainer/devcontainer.json`'s commands,
//!   else a default detected from its lockfiles), read from the base
//!   commit, and the key an environment is kept under.
//! * [`egress`]: the host-side forward proxy that is the setup phase's
//!   only way out: package registries the operator allows, never a
//!   private or loopback address.
//! * [`hosts`]: the allow-list proposed from the host's own package
//!   managers (`forgehand env hosts`).
//! * [`build`]: the setup phase, in sandboxes whose only way out is the
//!   egress proxy, over a [`view`] of only the environment's inputs;
//!   [`cache`]: the built environments kept on disk.

pub mod build;
pub mod cache;
pub mod config;
pub mod egress;
pub mod hosts;
pub mod keep;
pub mod spec;
pub mod view;
