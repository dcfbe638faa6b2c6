//! Shared pieces of the end-to-end suite.

pub mod api_spec;
pub mod eval_dataset;
pub mod fake_forge;
pub mod forge_clients;
pub mod git_http;
pub mod git_ssh;
pub mod gitea_events;
pub mod github_app;
pub mod harness;
pub mod local_run;
pub mod local_server;
pub mod model_server;
pub mod normalise;
pub mod project;
pub mod story;
pub mod testdata;

/// The guest rootfs the sandbox tests run on: `FORGEHAND_TEST_ROOTFS`, or
/// where `images/build-rootfs` puts it. Fails, saying how to build it,
/// when it is not there.
pub fn rootfs() -> std::path::PathBuf {
    let path = std::env::var_os("FORGEHAND_TEST_ROOTFS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/var/cache/forgehand/rootfs"));
    assert!(
        path.join("bin/sh").exists(),
        "no guest rootfs at {} (build it: images/build-rootfs; tests/run.sh does)",
        path.display()
    );
    path
}
