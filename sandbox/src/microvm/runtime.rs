//! Where the runtime pieces are, microsandbox's backend built over them,
//! and the check that they are all there.

use std::fs::OpenOptions;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use microsandbox::config::GlobalConfig;
use microsandbox::LocalBackend;

use super::MicrovmRuntime;
use crate::Readiness;

const KVM: &str = "/dev/kvm";
/// `KVM_GET_API_VERSION`, and the only version there has ever been.
const KVM_GET_API_VERSION: u64 = 0xAE00;
const KVM_API_VERSION: i32 = 12;

const HOW_MSB: &str = "build it with `cargo install microsandbox-cli --version 0.7.13 \
     --no-default-features --features net` and set FORGEHAND_SANDBOX__MSB_PATH (or MSB_PATH)";
const HOW_LIBKRUNFW: &str = "take libkrunfw.so.5.6.1 (the guest kernel) from a microsandbox \
     0.7.13 release on a machine with internet access and set FORGEHAND_SANDBOX__LIBKRUNFW_PATH \
     (or MSB_LIBKRUNFW_PATH)";
const HOW_AGENTD: &str = "build crate microsandbox-agentd 0.7.13 for x86_64-unknown-linux-musl \
     and set FORGEHAND_SANDBOX__AGENTD_PATH (or MSB_AGENTD_PATH)";

/// microsandbox's local backend over `runtime`. Builds no database and
/// boots nothing. Its settings come from `runtime`, then the MSB_* variables
/// (MSB_PATH, MSB_LIBKRUNFW_PATH, MSB_AGENTD_PATH, MSB_HOME; these win over
/// `runtime`, which [`check`] reports), then microsandbox's defaults:
/// microsandbox's own user config file is not read.
pub(super) fn local_backend(runtime: &MicrovmRuntime) -> Result<LocalBackend, String> {
    let mut paths = serde_json::Map::new();
    for (key, path) in [
        ("msb", &runtime.msb),
        ("libkrunfw", &runtime.libkrunfw),
        ("agentd", &runtime.agentd),
    ] {
        if let Some(path) = path {
            let path = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
            paths.insert(key.into(), path.to_string_lossy().into_owned().into());
        }
    }
    // The builder takes runtime paths only from a config file: a private
    // one, read once by build_lazy() and removed.
    let file = std::env::temp_dir().join(format!(
        "forgehand-microsandbox-{}-{:012x}.json",
        std::process::id(),
        rand::random::<u64>() >> 16
    ));
    let json = serde_json::json!({ "version": 1, "paths": paths });
    std::fs::write(&file, json.to_string())
        .map_err(|e| format!("writing {}: {e}", file.display()))?;
    let mut builder = LocalBackend::builder().config_path(&file);
    if let Some(home) = &runtime.home {
        builder = builder.home(home);
    }
    let built = builder.build_lazy();
    let _ = std::fs::remove_file(&file);
    built.map_err(|e| format!("configuring microsandbox: {e}"))
}

/// Whether everything a microVM needs is here. Boots nothing (see
/// `MicrovmBackend::trial_boot`); creates the home's folders if missing.
/// Blocking.
pub(super) fn check(runtime: &MicrovmRuntime) -> Readiness {
    let mut problems = Vec::new();
    if let Err(problem) = check_kvm() {
        problems.push(problem);
    }
    let local = match local_backend(runtime) {
        Ok(local) => local,
        Err(problem) => {
            problems.push(problem);
            return Readiness::Unusable(problems.join("; "));
        }
    };
    let config = local.config();
    problems.extend(overridden(runtime, config));
    let pieces = check_pieces(config, &mut problems);
    check_home(config, &mut problems);
    match pieces {
        Some((msb, libkrunfw, agentd)) if problems.is_empty() => Readiness::Usable(format!(
            "microVMs (microsandbox 0.7.13; msb {}, libkrunfw {}, agentd {}, home {}); no VM booted yet",
            msb.display(),
            libkrunfw.display(),
            agentd.display(),
            config.home().display()
        )),
        _ => Readiness::Unusable(problems.join("; ")),
    }
}

fn check_kvm() -> Result<(), String> {
    if !Path::new(KVM).exists() {
        return Err(format!(
            "{KVM} is missing: this host has no KVM (enable virtualization in the firmware or the \
             hypervisor, load kvm_intel or kvm_amd)"
        ));
    }
    let kvm = OpenOptions::new()
        .read(true)
        .write(true)
        .open(KVM)
        .map_err(|e| {
            format!("{KVM} cannot be opened read-write ({e}): run as root or add the service user to the kvm group")
        })?;
    // SAFETY: an ioctl without arguments on a descriptor we own.
    let version = unsafe { libc::ioctl(kvm.as_raw_fd(), KVM_GET_API_VERSION as _, 0) };
    if version != KVM_API_VERSION {
        return Err(format!(
            "{KVM} answers KVM API version {version}, not {KVM_API_VERSION}"
        ));
    }
    Ok(())
}

/// The MSB_* variables and operator policy win over `runtime`'s paths:
/// if they point elsewhere, say so rather than run something else.
fn overridden(runtime: &MicrovmRuntime, config: &GlobalConfig) -> Vec<String> {
    let mut problems = Vec::new();
    for (piece, variable, wanted, got) in [
        ("msb", "MSB_PATH", &runtime.msb, &config.paths.msb),
        (
            "libkrunfw",
            "MSB_LIBKRUNFW_PATH",
            &runtime.libkrunfw,
            &config.paths.libkrunfw,
        ),
        (
            "agentd",
            "MSB_AGENTD_PATH",
            &runtime.agentd,
            &config.paths.agentd,
        ),
        ("home", "MSB_HOME", &runtime.home, &config.home),
    ] {
        let Some(wanted) = wanted else { continue };
        let wanted = std::path::absolute(wanted).unwrap_or_else(|_| wanted.clone());
        if got.as_ref() != Some(&wanted) {
            problems.push(format!(
                "{piece} is configured as {} but microsandbox would use {} ({variable} in the \
                 environment, or the operator's managed microsandbox config, overrides it): \
                 unset one or make them agree",
                wanted.display(),
                got.as_ref()
                    .map_or("nothing".into(), |p| p.display().to_string()),
            ));
        }
    }
    problems
}

/// msb, libkrunfw and agentd as microsandbox resolves them; each missing
/// one is named, with how to get it.
fn check_pieces(
    config: &GlobalConfig,
    problems: &mut Vec<String>,
) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let mut pair_named = true;
    if let Some(msb) = &config.paths.msb {
        if let Err(e) = executable(msb) {
            problems.push(format!("msb (the microsandbox runtime) {e}: {HOW_MSB}"));
            pair_named = false;
        }
    }
    if let Some(libkrunfw) = &config.paths.libkrunfw {
        if !libkrunfw.is_file() {
            problems.push(format!(
                "libkrunfw (the guest kernel library) is missing at {}: {HOW_LIBKRUNFW}",
                libkrunfw.display()
            ));
            pair_named = false;
        }
    }
    let agentd = match &config.paths.agentd {
        Some(agentd) => match elf(agentd) {
            Ok(()) => Some(agentd.clone()),
            Err(e) => {
                problems.push(format!("agentd (the guest agent) {e}: {HOW_AGENTD}"));
                None
            }
        },
        None => {
            problems.push(format!(
                "agentd (the guest agent) is not configured (this msb is built without embedded \
                 binaries): {HOW_AGENTD}"
            ));
            None
        }
    };
    if !pair_named {
        return None;
    }
    // The pair as a launch would pick it (also from the home's bin/ and lib/).
    let pair = match microsandbox::setup::resolve_runtime(config) {
        Ok(pair) => pair,
        Err(e) => {
            problems.push(format!(
                "msb (the microsandbox runtime) and libkrunfw (the guest kernel) are not both \
                 there ({e}): {HOW_MSB}; {HOW_LIBKRUNFW}"
            ));
            return None;
        }
    };
    if let Err(e) = executable(&pair.msb_path) {
        problems.push(format!("msb (the microsandbox runtime) {e}: {HOW_MSB}"));
        return None;
    }
    Some((pair.msb_path, pair.libkrunfw_path, agentd?))
}

fn executable(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        Ok(_) => Err(format!("at {} is not an executable file", path.display())),
        Err(e) => Err(format!("is missing at {} ({e})", path.display())),
    }
}

fn elf(path: &Path) -> Result<(), String> {
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic));
    match read {
        Ok(()) if magic == *b"\x7fELF" => Ok(()),
        Ok(()) => Err(format!("at {} is not an ELF executable", path.display())),
        Err(e) => Err(format!("is missing at {} ({e})", path.display())),
    }
}

/// The home's folders; made when missing and the home is writable.
fn check_home(config: &GlobalConfig, problems: &mut Vec<String>) {
    let home = config.home();
    for dir in [
        config.sandboxes_dir(),
        config.volumes_dir(),
        config.snapshots_dir(),
        config.cache_dir(),
        config.logs_dir(),
        config.secrets_dir(),
        config.run_dir(),
    ] {
        if dir.is_dir() {
            continue;
        }
        if let Err(e) = std::fs::create_dir_all(&dir) {
            problems.push(format!(
                "the microsandbox home {} lacks {} and it cannot be made ({e}): set \
                 FORGEHAND_SANDBOX__MSB_HOME (or MSB_HOME) to a writable directory",
                home.display(),
                dir.display()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_every_missing_piece_and_how_to_get_it() {
        let home = tempfile::tempdir().unwrap();
        let runtime = MicrovmRuntime {
            msb: Some("/nonexistent/forgehand/msb".into()),
            libkrunfw: Some("/nonexistent/forgehand/libkrunfw.so.5.6.1".into()),
            agentd: Some("/nonexistent/forgehand/agentd".into()),
            home: Some(home.path().join("msb-home")),
        };
        let readiness = check(&runtime);
        let detail = readiness.detail();
        assert!(!readiness.is_usable(), "{detail}");
        // Each piece by name and path, with where to get it. (An MSB_*
        // variable in this test's environment would be reported instead.)
        for (name, path, how) in [
            (
                "msb",
                "/nonexistent/forgehand/msb",
                "FORGEHAND_SANDBOX__MSB_PATH",
            ),
            (
                "libkrunfw",
                "/nonexistent/forgehand/libkrunfw.so.5.6.1",
                "FORGEHAND_SANDBOX__LIBKRUNFW_PATH",
            ),
            (
                "agentd",
                "/nonexistent/forgehand/agentd",
                "FORGEHAND_SANDBOX__AGENTD_PATH",
            ),
        ] {
            assert!(detail.contains(&format!("{name} (")), "{name}: {detail}");
            assert!(detail.contains(path), "{path}: {detail}");
            assert!(detail.contains(how), "{how}: {detail}");
        }
        // This machine's /dev/kvm is accessible (paravirtual KVM): whatever
        // it is, the message must not blame KVM unless it is unusable.
        if check_kvm().is_ok() {
            assert!(!detail.contains(KVM), "{detail}");
        }
        // The home's folders were made.
        for dir in [
            "sandboxes",
            "volumes",
            "snapshots",
            "cache",
            "logs",
            "secrets",
            "run",
        ] {
            assert!(home.path().join("msb-home").join(dir).is_dir(), "{dir}");
        }
    }

    #[test]
    fn an_unwritable_home_is_named() {
        let runtime = MicrovmRuntime {
            home: Some("/proc/forgehand-msb-home".into()),
            ..Default::default()
        };
        let detail = check(&runtime).detail().to_owned();
        assert!(detail.contains("/proc/forgehand-msb-home"), "{detail}");
        assert!(detail.contains("FORGEHAND_SANDBOX__MSB_HOME"), "{detail}");
        // Without any configured agentd, that is said too.
        assert!(
            detail.contains("agentd (the guest agent) is not configured"),
            "{detail}"
        );
    }
}
