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
    manifests_in("deploy/kubernetes")
}

fn manifests_in(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
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

/// Issue 29: the PostgreSQL variant for Compose — a `postgres` service,
/// one intake replica that runs no job, two worker replicas — parses, and
/// the password reaches Forgehand as `PGPASSWORD`, never in a URL.
#[test]
fn the_compose_postgres_variant_parses_with_its_replicas() {
    let file = repo().join("deploy/compose.postgres.yaml");
    let out = Command::new("docker-compose")
        .arg("-f")
        .arg(&file)
        .arg("config")
        .env("FORGEHAND_PUBLIC_URL", "https://forgehand.example.com")
        .env("POSTGRES_PASSWORD", "pw-from-the-environment")
        .output()
        .expect("docker-compose");
    let config = text(&out);
    assert!(out.status.success(), "{config}");
    for expected in [
        "image: docker.io/library/postgres:16",
        "replicas: 2",
        "FORGEHAND_QUEUE__WORKERS: '0'",
        "FORGEHAND_DATABASE__URL: postgres://forgehand@postgres:5432/forgehand",
        "PGPASSWORD: pw-from-the-environment",
        "forgehand-postgres:/var/lib/postgresql/data:rw",
    ] {
        assert!(config.contains(expected), "{expected} not in:\n{config}");
    }
    assert!(!config.contains(":pw-from-the-environment@"), "{config}");
    // Without a password it refuses to start rather than run open.
    let out = Command::new("docker-compose")
        .arg("-f")
        .arg(&file)
        .arg("config")
        .env_remove("POSTGRES_PASSWORD")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("set POSTGRES_PASSWORD"),
        "{}",
        text(&out)
    );
}

/// Issue 29: the PostgreSQL variant for Kubernetes validates against the
/// API's schemas: the database URL from a Secret, intake replicas that
/// run no job behind the Service, two worker replicas each with data of
/// its own.
#[test]
fn the_kubernetes_postgres_variant_validates_with_two_workers() {
    let validator = validator();
    let files = manifests_in("deploy/kubernetes/postgres");
    assert_eq!(files.len(), 4, "{files:?}");
    let out = Command::new(&validator)
        .arg("--strict")
        .args(&files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let docs = documents(&validator, &files);
    let deployment = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Deployment {name}"))
            .clone()
    };
    let env = |d: &Value, name: &str| -> Option<String> {
        d["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].as_str().unwrap().to_owned())
    };
    let workers = deployment("forgehand-workers");
    assert_eq!(workers["spec"]["replicas"], 2);
    assert_eq!(
        env(&workers, "FORGEHAND_QUEUE__WORKERS").as_deref(),
        Some("2")
    );
    let volumes = workers["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    assert!(volumes
        .iter()
        .any(|v| v["name"] == "data" && v["emptyDir"].is_object()));
    let intake = deployment("forgehand-intake");
    assert_eq!(
        env(&intake, "FORGEHAND_QUEUE__WORKERS").as_deref(),
        Some("0")
    );
    assert!(intake["spec"]["template"]["spec"]["containers"][0]["securityContext"].is_null());
    for d in [&workers, &intake] {
        let from: Vec<&str> = d["spec"]["template"]["spec"]["containers"][0]["envFrom"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["secretRef"]["name"].as_str())
            .collect();
        assert!(from.contains(&"forgehand-database"), "{from:?}");
    }
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == "forgehand-database")
        .unwrap();
    assert!(secret["stringData"]["FORGEHAND_DATABASE__URL"]
        .as_str()
        .unwrap()
        .starts_with("postgres://"));
    let service = docs.iter().find(|d| d["kind"] == "Service").unwrap();
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/component"],
        "intake"
    );
    // The validator does refuse a broken copy.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("workers.yaml");
    let original =
        std::fs::read_to_string(repo().join("deploy/kubernetes/postgres/workers.yaml")).unwrap();
    std::fs::write(&broken, original.replace("replicas: 2", "replicas: two")).unwrap();
    let out = Command::new(&validator)
        .arg("--strict")
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
}
