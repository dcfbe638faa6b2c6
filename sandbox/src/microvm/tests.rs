//! What would boot, checked without booting: microsandbox's builder
//! `build()` returns the final configuration and starts nothing.

use std::collections::BTreeMap;

use microsandbox::sandbox::exec::StdinMode;
use microsandbox::sandbox::{
    ExecOptionsBuilder, HostPermissions, RlimitResource, RootfsSource, SecurityProfile, VolumeMount,
};
use microsandbox::SandboxConfig;

use super::config::{builder, command_line, exec_options, verify, verify_isolation, TMPFS_DIRS};
use super::*;

struct Fixture {
    _dirs: tempfile::TempDir,
    runtime: MicrovmRuntime,
    spec: SandboxSpec,
}

fn fixture(limits: Limits) -> Fixture {
    let dirs = tempfile::tempdir().unwrap();
    let (rootfs, workspace, home) = (
        dirs.path().join("rootfs"),
        dirs.path().join("job-42"),
        dirs.path().join("msb-home"),
    );
    for dir in [&rootfs, &workspace, &home] {
        std::fs::create_dir(dir).unwrap();
    }
    let mut env = crate::spec::base_env();
    env.insert("FORGEHAND_JOB".into(), "42".into());
    Fixture {
        runtime: MicrovmRuntime {
            home: Some(home),
            ..Default::default()
        },
        spec: SandboxSpec {
            rootfs,
            workspace,
            home: None,
            handover: Default::default(),
            env,
            limits,
        },
        _dirs: dirs,
    }
}

fn limits() -> Limits {
    Limits {
        memory_mib: 768,
        vcpus: 3,
        max_pids: 77,
        ..Default::default()
    }
}

/// The configuration microsandbox would boot for `spec`.
async fn built(f: &Fixture) -> SandboxConfig {
    let local: Arc<dyn MsbBackend> = Arc::new(runtime::local_backend(&f.runtime).unwrap());
    let builder = builder("fh-1-2-abc", &f.spec).unwrap();
    with_backend(local, builder.build()).await.unwrap()
}

#[tokio::test]
async fn no_network_device_and_only_the_workspace_shared() {
    let f = fixture(limits());
    let config = built(&f).await;
    let s = &config.spec;

    assert!(!s.network.enabled, "a network device: {:?}", s.network);
    assert!(s.network.ports.is_empty());
    assert!(s.vsock.is_empty());

    match &s.image {
        RootfsSource::Bind { path, .. } => assert_eq!(*path, f.spec.rootfs),
        other => panic!("the rootfs is {other:?}"),
    }
    let mut tmpfs = Vec::new();
    let mut workspace = None;
    for mount in &s.mounts {
        match mount {
            VolumeMount::Bind {
                host,
                guest,
                options,
                host_permissions,
                ..
            } => {
                assert_eq!(guest, WORKSPACE);
                assert_eq!(*host, f.spec.workspace, "the working copy at /workspace");
                assert!(!options.readonly && options.nosuid && options.nodev);
                assert_eq!(
                    (options.override_uid, options.override_gid),
                    (Some(1000), Some(1000))
                );
                assert_eq!(*host_permissions, HostPermissions::Mirror);
                workspace = Some(host.clone());
            }
            VolumeMount::Tmpfs { guest, .. } => tmpfs.push(guest.clone()),
            other => panic!("an unexpected mount: {other:?}"),
        }
    }
    assert!(workspace.is_some(), "no /workspace mount: {:?}", s.mounts);
    tmpfs.sort();
    let mut expected: Vec<String> = TMPFS_DIRS.iter().map(|d| d.to_string()).collect();
    expected.sort();
    assert_eq!(tmpfs, expected);

    assert_eq!(s.resources.cpus, 3);
    assert_eq!(s.resources.memory_mib, 768);
    assert_eq!(s.runtime.user.as_deref(), Some("1000:1000"));
    assert_eq!(s.runtime.workdir.as_deref(), Some(WORKSPACE));
    assert_eq!(s.runtime.hostname.as_deref(), Some("sandbox"));
    assert_eq!(s.security_profile, SecurityProfile::Restricted);
    assert!(s.lifecycle.ephemeral);
    let env: BTreeMap<String, String> = s
        .env
        .iter()
        .map(|v| (v.key.clone(), v.value.clone()))
        .collect();
    assert_eq!(env, f.spec.env, "exactly the spec's environment");

    verify(&config, &f.spec).unwrap();
}

#[tokio::test]
async fn anything_else_is_refused_before_it_boots() {
    let f = fixture(limits());
    let good = built(&f).await;

    let mut networked = good.clone();
    networked.spec.network.enabled = true;
    assert!(verify(&networked, &f.spec)
        .unwrap_err()
        .contains("network device"));
    assert!(verify_isolation(&networked, &f.spec).is_err());

    let mut extra = good.clone();
    let host_root = VolumeMount::Tmpfs {
        guest: "/host".into(),
        size_mib: None,
        options: Default::default(),
    };
    extra.spec.mounts.push(host_root);
    assert!(verify(&extra, &f.spec)
        .unwrap_err()
        .contains("unexpected mount"));
    // Once it runs, microsandbox may have added private mounts of its own,
    // but never a directory of the host.
    verify_isolation(&extra, &f.spec).unwrap();
    let mut host_dir = good.clone();
    let mut second = good
        .spec
        .mounts
        .iter()
        .find(|m| m.guest() == WORKSPACE)
        .unwrap()
        .clone();
    if let VolumeMount::Bind { guest, .. } = &mut second {
        *guest = "/host".into();
    }
    host_dir.spec.mounts.push(second);
    let err = verify_isolation(&host_dir, &f.spec).unwrap_err();
    assert!(err.contains("mounted at /host"), "{err}");

    let mut no_tmp = good.clone();
    no_tmp.spec.mounts.retain(|m| m.guest() != "/tmp");
    assert!(verify(&no_tmp, &f.spec).unwrap_err().contains("/tmp"));

    let mut other_root = good.clone();
    other_root.spec.image = RootfsSource::Bind {
        path: "/".into(),
        follow_root_symlinks: false,
    };
    assert!(verify(&other_root, &f.spec)
        .unwrap_err()
        .contains("root file system"));

    let mut as_root = good.clone();
    as_root.spec.runtime.user = Some("0".into());
    assert!(verify(&as_root, &f.spec).is_err());

    let mut bigger = f.spec.clone();
    bigger.limits.memory_mib = 4096;
    assert!(verify(&good, &bigger).unwrap_err().contains("MiB"));
}

#[test]
fn limits_out_of_range_are_refused() {
    for vcpus in [0, 256] {
        let f = fixture(Limits { vcpus, ..limits() });
        let err = builder("fh-1-2-abc", &f.spec).err().unwrap();
        assert!(err.to_string().contains("vcpus"), "{err}");
    }
}

#[test]
fn every_exec_has_the_process_limit_the_guest_user_and_exactly_its_environment() {
    let base = BTreeMap::from([
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("GREETING".to_owned(), "hi".to_owned()),
    ]);
    let request = ExecRequest::new(["-weird", "a b", ""])
        .env("GREETING", "hello")
        .stdin(b"in".to_vec());
    let (program, args) = command_line(&base, &request).unwrap();
    assert_eq!(program, "/usr/bin/env");
    assert_eq!(
        args,
        [
            "-i",
            "--",
            "GREETING=hello",
            "PATH=/usr/bin:/bin",
            "-weird",
            "a b",
            ""
        ]
    );

    let lim = Limits {
        max_pids: 48,
        ..Limits::default()
    };
    let options = exec_options(
        ExecOptionsBuilder::default(),
        args.clone(),
        "/tmp",
        &lim,
        request.stdin,
    )
    .build()
    .unwrap();
    let nproc: Vec<_> = options
        .rlimits
        .iter()
        .filter(|r| r.resource == RlimitResource::Nproc)
        .collect();
    assert_eq!(nproc.len(), 1, "{:?}", options.rlimits);
    assert_eq!((nproc[0].soft, nproc[0].hard), (48, 48));
    assert_eq!(options.user.as_deref(), Some("1000:1000"));
    assert_eq!(options.cwd.as_deref(), Some("/tmp"));
    assert_eq!(options.args, args);
    assert!(
        options.env.is_empty(),
        "the environment goes through env -i"
    );
    assert!(!options.tty);
    assert!(matches!(options.stdin, StdinMode::Bytes(ref b) if b == b"in"));

    let none = exec_options(ExecOptionsBuilder::default(), vec![], "/", &lim, None)
        .build()
        .unwrap();
    assert!(matches!(none.stdin, StdinMode::Null));

    let err = command_line(&base, &ExecRequest::new(["A=B"])).unwrap_err();
    assert!(err.to_string().contains("'='"), "{err}");
}

#[tokio::test]
async fn create_fails_closed_without_a_runtime() {
    let mut f = fixture(limits());
    for dir in ["workspace", "bin", "usr/bin"] {
        std::fs::create_dir_all(f.spec.rootfs.join(dir)).unwrap();
    }
    for file in ["bin/sh", "usr/bin/env"] {
        std::fs::write(f.spec.rootfs.join(file), "").unwrap();
    }
    f.runtime.msb = Some("/nonexistent/forgehand/msb".into());
    f.runtime.libkrunfw = Some("/nonexistent/forgehand/libkrunfw.so.5.6.1".into());
    let backend = MicrovmBackend::new(f.runtime.clone());
    let created = tokio::time::timeout(Duration::from_secs(60), backend.create(f.spec.clone()))
        .await
        .expect("create gives up");
    let err = created.err().expect("no microVM without a runtime");
    assert!(matches!(err, SandboxError::Start(_)), "{err}");
    // Nothing is left behind.
    let local = backend.local().await.unwrap();
    let page = with_backend(local, Vm::list()).await.unwrap();
    let names: Vec<&str> = page.sandboxes.iter().map(|h| h.name()).collect();
    assert!(names.is_empty(), "left behind: {names:?}");
    assert_eq!(backend.remove_leftovers().await.unwrap(), 0);
}

#[tokio::test]
async fn create_checks_the_image_first() {
    let f = fixture(limits());
    let err = MicrovmBackend::new(f.runtime.clone())
        .create(f.spec.clone())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("no /workspace directory"), "{err}");
}

#[tokio::test]
async fn leftovers_of_nothing_are_nothing() {
    let f = fixture(limits());
    let backend = MicrovmBackend::new(MicrovmRuntime {
        home: Some(f.spec.workspace.join("never-made")),
        ..Default::default()
    });
    assert_eq!(backend.remove_leftovers().await.unwrap(), 0);
    assert!(
        !f.spec.workspace.join("never-made").exists(),
        "nothing made"
    );
}

#[test]
fn runtime_paths_come_from_forgehand_variables() {
    // Only checks the mapping of a value to a field; the variables' names
    // are the ones the conformance suite and the config loader use.
    let runtime = MicrovmRuntime::from_env();
    let expected = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    assert_eq!(runtime.msb, expected("FORGEHAND_SANDBOX__MSB_PATH"));
    assert_eq!(
        runtime.libkrunfw,
        expected("FORGEHAND_SANDBOX__LIBKRUNFW_PATH")
    );
    assert_eq!(runtime.agentd, expected("FORGEHAND_SANDBOX__AGENTD_PATH"));
    assert_eq!(runtime.home, expected("FORGEHAND_SANDBOX__MSB_HOME"));
}

#[test]
fn owner_names_are_valid_microsandbox_names() {
    let name = crate::owner::sandbox_name();
    microsandbox::validate_sandbox_name(&name).unwrap();
    assert!(name.len() < 48, "{name}");
}
