//! The deployment files, checked by tools that parse them: the Compose
//! file by Debian's docker-compose, the Kubernetes manifests against the
//! Kubernetes API's schemas by kubernetes-validate (PyPI; it bundles
//! them, so this runs offline), and the run flags the image needs, as
//! `deploy/image.sh flags` prints them, the same in the README and in
//! what `forgehand serve` says when they are missing. Each check is shown
//! to fail on a broken copy.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn docker_compose(file: &Path) -> Output {
    Command::new("docker-compose")
        .arg("-f")
        .arg(file)
        .arg("config")
        .env("FORGEHAND_PUBLIC_URL", "https://forgehand.example.com")
        .output()
        .expect("docker-compose (Debian package docker-compose): scripts/lib.sh container_packages installs it, tests/run.sh calls that")
}

#[test]
fn the_compose_file_parses_with_its_volume_and_the_backends_needs() {
    let file = repo().join("deploy/compose.yaml");
    let out = docker_compose(&file);
    let config = text(&out);
    assert!(out.status.success(), "{config}");
    for expected in [
        "privileged: true",
        "image: localhost/forgehand:dev",
        "dockerfile: deploy/Containerfile",
        "forgehand-data:/var/lib/forgehand:rw",
        "forgehand-cache:/var/cache/forgehand:rw",
        "FORGEHAND_SERVER__PUBLIC_URL: https://forgehand.example.com",
        "FORGEHAND_SANDBOX__BACKEND: namespace",
        "published: 8080",
    ] {
        assert!(config.contains(expected), "{expected} not in:\n{config}");
    }
    // A key Compose does not know is refused: the file is really parsed.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("compose.yaml");
    let original = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&broken, original.replace("restart:", "restrat:")).unwrap();
    let out = docker_compose(&broken);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("restrat"), "{}", text(&out));
}

/// kubernetes-validate, installed by the project's script when missing.
fn validator() -> PathBuf {
    let out = Command::new("bash")
        .arg("-c")
        .arg(". scripts/lib.sh && k8s_validator")
        .current_dir(repo())
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "kubernetes-validate (PyPI) could not be installed by scripts/lib.sh k8s_validator: {}",
        text(&out)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("deploy/kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every document of `files`, as JSON (through the validator's own
/// PyYAML).
fn documents(validator: &Path, files: &[PathBuf]) -> Vec<Value> {
    let python = validator.parent().unwrap().join("python");
    let out = Command::new(python)
        .arg("-c")
        .arg("import json, sys, yaml; json.dump([d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d], sys.stdout)")
        .args(files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_kubernetes_manifests_validate_against_the_api_schemas() {
    let validator = validator();
    let files = manifests();
    assert!(files.len() >= 5, "{files:?}");
    let out = Command::new(&validator)
        .arg("--strict")
        .args(&files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));

    let docs = documents(&validator, &files);
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    for kind in [
        "Deployment",
        "Service",
        "PersistentVolumeClaim",
        "Secret",
        "ConfigMap",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment["spec"]["strategy"]["type"], "Recreate",
        "one SQLite writer"
    );
    let pod = &deployment["spec"]["template"];
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    assert_eq!(annotations["prometheus.io/port"], "8080");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(
        container["securityContext"]["privileged"], true,
        "the namespace backend"
    );
    let env = container["env"].as_array().unwrap();
    assert!(env
        .iter()
        .any(|e| e["name"] == "FORGEHAND_SANDBOX__BACKEND" && e["value"] == "namespace"));
    assert_eq!(container["envFrom"][0]["secretRef"]["name"], "forgehand");
    let mounts: Vec<&str> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    for path in [
        "/var/lib/forgehand",
        "/var/cache/forgehand",
        "/etc/forgehand/forgehand.toml",
    ] {
        assert!(mounts.contains(&path), "{path} not in {mounts:?}");
    }
    let claim = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|v| v["persistentVolumeClaim"]["claimName"].as_str());
    assert_eq!(claim, Some("forgehand-data"));

    // A field the API does not have, or of the wrong type, fails.
    let dir = tempfile::tempdir().unwrap();
    let original =
        std::fs::read_to_string(repo().join("deploy/kubernetes/deployment.yaml")).unwrap();
    for (from, to) in [
        ("readinessProbe:", "readynessProbe:"),
        ("periodSeconds: 20", "periodSeconds: \"twenty\""),
    ] {
        let broken = dir.path().join("deployment.yaml");
        std::fs::write(&broken, original.replacen(from, to, 1)).unwrap();
        let out = Command::new(&validator)
            .arg("--strict")
            .arg(&broken)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{to}: {}", text(&out));
    }
}

#[test]
fn the_run_flags_are_the_same_in_the_script_the_readme_and_the_refusal() {
    let flags = |backend: &str| -> Vec<String> {
        let out = Command::new("bash")
            .args(["deploy/image.sh", "flags", "--backend", backend])
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let namespace = flags("namespace");
    let default = {
        let out = Command::new("bash")
            .args(["deploy/image.sh", "flags"])
            .current_dir(repo())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(default, namespace, "the namespace backend is the default");
    let microvm = flags("microvm");
    assert!(
        microvm.contains(&"--device=/dev/kvm".to_owned()),
        "{microvm:?}"
    );
    // What serve names when they are missing.
    for flag in forgehand_bot::container::NAMESPACE_FLAGS.split(' ') {
        assert!(
            namespace.contains(&flag.to_owned()),
            "{flag} not in {namespace:?}"
        );
    }
    for flag in forgehand_bot::container::MICROVM_FLAGS.split(' ') {
        assert!(
            microvm.contains(&flag.to_owned()),
            "{flag} not in {microvm:?}"
        );
    }
    // The README's container section shows the same.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split("## Run it in a container")
        .nth(1)
        .expect("a \"Run it in a container\" section in the README");
    for flag in namespace.iter().chain(&microvm) {
        assert!(
            section.contains(flag.as_str()),
            "{flag} not in the README's container section"
        );
    }
    assert!(section.contains("docker run"), "{section}");
    // An unknown backend is an error, not an empty list.
    let out = Command::new("bash")
        .args(["deploy/image.sh", "flags", "--backend", "docker"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(!out.status.success());
}
