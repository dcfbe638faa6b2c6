//! The quick start's choice of sandbox backend (scripts/lib.sh, used by
//! deploy/quickstart.sh): microVMs only where a trial microVM boots, by
//! `forgehand doctor`'s boot probe, never because /dev/kvm is there (this
//! machine has /dev/kvm and boots no guest); and when microsandbox's
//! runtime pieces are missing, each is named with how to get it.

use std::path::Path;
use std::process::{Command, Output};

use forgehand_tests::story::forgehand_binary;

fn lib(call: &str, env: &[(&str, &str)]) -> Output {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    Command::new("bash")
        .arg("-c")
        .arg(format!(". scripts/lib.sh && {call}"))
        .current_dir(repo)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn each_missing_microvm_piece_is_named_with_how_to_get_it() {
    let home = tempfile::tempdir().unwrap();
    let home_s = home.path().to_str().unwrap();
    let out = lib("microvm_pieces", &[("HOME", home_s)]);
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out);
    for expected in [
        "cargo install microsandbox-cli --version 0.7.13",
        "libkrunfw.so.5.6.1",
        "microsandbox-agentd 0.7.13",
        "FORGEHAND_SANDBOX__MSB_PATH",
        "FORGEHAND_SANDBOX__LIBKRUNFW_PATH",
        "FORGEHAND_SANDBOX__AGENTD_PATH",
    ] {
        assert!(said.contains(expected), "{expected} not in:\n{said}");
    }

    // With all three in place, nothing is missing.
    let dir = home.path();
    for (name, mode) in [
        ("msb", 0o755),
        ("libkrunfw.so.5.6.1", 0o644),
        ("agentd", 0o755),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .unwrap();
    }
    let path = |n: &str| dir.join(n).display().to_string();
    let (msb, krunfw, agentd) = (path("msb"), path("libkrunfw.so.5.6.1"), path("agentd"));
    let out = lib(
        "microvm_pieces",
        &[
            ("HOME", home_s),
            ("FORGEHAND_SANDBOX__MSB_PATH", &msb),
            ("FORGEHAND_SANDBOX__LIBKRUNFW_PATH", &krunfw),
            ("FORGEHAND_SANDBOX__AGENTD_PATH", &agentd),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn the_boot_probe_reads_doctors_verdict_on_the_microvm_backend() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("forgehand");
    for (line, boots) in [
        (
            "backend microvm    usable: a trial microVM booted and ran `true` in 0.8 s",
            true,
        ),
        (
            "backend microvm    NOT usable: trial boot of a microVM failed: guest did not start",
            false,
        ),
    ] {
        std::fs::write(&fake, format!("#!/bin/sh\n[ \"$FORGEHAND_SANDBOX__BACKEND\" = microvm ] || exit 3\necho 'backend namespace  usable: x'\necho '{}'\n", line.replace('`', "\\`"))).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let out = lib(&format!("microvm_boots {}", fake.display()), &[]);
        assert_eq!(out.status.success(), boots, "{line}: {}", stderr(&out));
        if !boots {
            assert!(
                stderr(&out).contains("trial boot of a microVM failed"),
                "{}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn here_dev_kvm_is_present_and_the_probe_still_says_no() {
    let rootfs = forgehand_tests::rootfs();
    let home = tempfile::tempdir().unwrap();
    let out = lib(
        &format!("microvm_boots {}", forgehand_binary().display()),
        &[
            ("HOME", home.path().to_str().unwrap()),
            ("FORGEHAND_SANDBOX__ROOTFS", rootfs.to_str().unwrap()),
        ],
    );
    let said = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "no microVM boots on these machines: {said}"
    );
    assert!(
        said.starts_with("backend microvm    NOT usable: "),
        "{said}"
    );
    if Path::new("/dev/kvm").exists() {
        assert!(!said.contains("/dev/kvm is missing"), "{said}");
    }
}
