//! Subcommands beyond `serve`: what operators run by hand.

pub mod db;
mod doctor;
mod doctor_forge;
pub mod env;
pub mod eval;
pub mod gate;
pub mod run;
mod sandbox_exec;
pub mod setup;

pub use doctor::doctor;
pub use sandbox_exec::{sandbox_exec, SandboxExecArgs};

/// Resolves on Ctrl-C or SIGTERM. The commands that hand a directory to a
/// sandbox race their work against it, so that an interrupted run still
/// destroys its sandbox (giving the directory back to its owner) and
/// removes its job directory, rather than dying with both left behind.
pub(crate) async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without handlers the default (dying) is all there is.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
