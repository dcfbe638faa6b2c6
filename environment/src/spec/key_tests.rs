use super::*;
use crate::spec::testing::MapFiles;
use crate::spec::{DebianPackage, Source};

fn declared(packages: &[&str], setup: Option<&str>, inputs: &[&str]) -> Declared {
    Declared {
        packages: packages
            .iter()
            .map(|p| DebianPackage::new(p).unwrap())
            .collect(),
        setup: setup.map(str::to_owned),
        test: Some("npm test".into()),
        source: Source::ForgehandToml,
        inputs: inputs.iter().map(|p| p.to_string()).collect(),
        whole_tree: false,
    }
}

fn files() -> MapFiles {
    MapFiles::new()
        .with("package-lock.json", "{\"lockfileVersion\": 3}")
        .with("package.json", "{}")
}

fn key_of(
    image: &str,
    repository: &str,
    declared: &Declared,
    ca: Option<&[u8]>,
    files: &MapFiles,
) -> EnvKey {
    key(
        &KeyParts {
            image,
            repository,
            declared,
            ca_bundle: ca,
            allowed: &[],
        },
        files,
    )
    .unwrap()
}

const REPO: &str = "github:owner/app";

#[test]
fn the_key_is_stable_hex_and_parses_back() {
    let d = declared(&["nodejs", "npm"], Some("npm ci"), &["package-lock.json"]);
    let a = key_of("img1", REPO, &d, None, &files());
    let b = key_of("img1", REPO, &d, None, &files());
    assert_eq!(a, b);
    assert_eq!(a.to_string().len(), 64);
    assert_eq!(a.to_string().parse::<EnvKey>().unwrap(), a);
    assert!("ABC".parse::<EnvKey>().is_err());
    assert!(a.to_string().to_uppercase().parse::<EnvKey>().is_err());
    assert!(format!("{a}0").parse::<EnvKey>().is_err());
}

#[test]
fn each_part_that_defines_the_environment_changes_the_key() {
    let d = declared(&["nodejs", "npm"], Some("npm ci"), &["package-lock.json"]);
    let base = key_of("img1", REPO, &d, None, &files());
    let changed = [
        key_of("img2", REPO, &d, None, &files()),
        key_of("img1", "github:owner/other", &d, None, &files()),
        key_of("img1", "gitea:owner/app", &d, None, &files()),
        key_of(
            "img1",
            REPO,
            &declared(&["nodejs"], Some("npm ci"), &["package-lock.json"]),
            None,
            &files(),
        ),
        key_of(
            "img1",
            REPO,
            &declared(
                &["nodejs", "npm"],
                Some("npm install"),
                &["package-lock.json"],
            ),
            None,
            &files(),
        ),
        key_of(
            "img1",
            REPO,
            &declared(&["nodejs", "npm"], None, &["package-lock.json"]),
            None,
            &files(),
        ),
        key_of(
            "img1",
            REPO,
            &d,
            Some(b"-----BEGIN CERTIFICATE-----"),
            &files(),
        ),
        key_of(
            "img1",
            REPO,
            &d,
            None,
            &files().with("package-lock.json", "{\"lockfileVersion\": 2}"),
        ),
        key_of(
            "img1",
            REPO,
            &d,
            None,
            &files().without("package-lock.json"),
        ),
        key_of(
            "img1",
            REPO,
            &declared(
                &["nodejs", "npm"],
                Some("npm ci"),
                &["package-lock.json", "package.json"],
            ),
            None,
            &files(),
        ),
    ];
    for (i, other) in changed.iter().enumerate() {
        assert_ne!(&base, other, "change {i} kept the key");
    }
    let mut all: Vec<&EnvKey> = changed.iter().collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), changed.len(), "two changes gave one key");
}

#[test]
fn an_empty_ca_bundle_is_not_no_bundle() {
    let d = declared(&[], Some("make"), &[]);
    assert_ne!(
        key_of("i", REPO, &d, None, &files()),
        key_of("i", REPO, &d, Some(b""), &files())
    );
}

#[test]
fn order_and_repeats_of_packages_and_inputs_and_the_test_do_not_matter() {
    let d = declared(
        &["nodejs", "npm"],
        Some("npm ci"),
        &["package-lock.json", "package.json"],
    );
    let mut reordered = declared(
        &["npm", "nodejs", "npm"],
        Some("npm ci"),
        &["package.json", "package-lock.json"],
    );
    reordered.test = Some("npm run other-test".into());
    reordered.source = Source::Detected(vec![]);
    assert_eq!(
        key_of("img", REPO, &d, None, &files()),
        key_of("img", REPO, &reordered, None, &files())
    );
}

#[test]
fn fields_cannot_run_into_each_other() {
    // The same bytes split differently between image and repository.
    let d = declared(&[], Some("x"), &[]);
    assert_ne!(
        key_of("ab", "c", &d, None, &files()),
        key_of("a", "bc", &d, None, &files())
    );
    // A path and its contents split differently.
    let one = MapFiles::new().with("ab", "c");
    let two = MapFiles::new().with("a", "bc");
    assert_ne!(
        key_of("i", REPO, &declared(&[], None, &["ab"]), None, &one),
        key_of("i", REPO, &declared(&[], None, &["a"]), None, &two)
    );
    // Setup text that looks like a package list.
    assert_ne!(
        key_of("i", REPO, &declared(&["nodejs"], None, &[]), None, &files()),
        key_of(
            "i",
            REPO,
            &declared(&[], Some("nodejs"), &[]),
            None,
            &files()
        )
    );
}

#[test]
fn an_oversized_input_is_an_error_not_a_whole_read() {
    let huge = MapFiles::new().huge("package-lock.json", MAX_INPUT_BYTES + 1);
    let d = declared(&["nodejs"], Some("npm ci"), &["package-lock.json"]);
    let error = key(
        &KeyParts {
            image: "i",
            repository: REPO,
            declared: &d,
            ca_bundle: None,
            allowed: &[],
        },
        &huge,
    )
    .unwrap_err();
    assert!(
        matches!(error, FilesError::TooLarge { ref path, max } if path == "package-lock.json" && max == MAX_INPUT_BYTES)
    );
    assert_eq!(
        huge.reads(),
        [("package-lock.json".to_owned(), MAX_INPUT_BYTES)]
    );
}

#[test]
fn a_failed_read_is_an_error() {
    let broken = MapFiles::new().broken("go.sum");
    let d = declared(&[], None, &["go.sum"]);
    let parts = KeyParts {
        image: "i",
        repository: REPO,
        declared: &d,
        ca_bundle: None,
        allowed: &[],
    };
    assert!(matches!(key(&parts, &broken), Err(FilesError::Read { .. })));
}

/// The view holds each input with its mode: a setup script made
/// executable is a different view, so a different key.
#[test]
fn an_inputs_mode_is_part_of_the_key() {
    let d = declared(&[], Some("./setup.sh"), &["setup.sh"]);
    let plain = MapFiles::new().with("setup.sh", "echo hi\n");
    let executable = MapFiles::new()
        .with("setup.sh", "echo hi\n")
        .executable("setup.sh");
    assert_ne!(
        key_of("img", REPO, &d, None, &plain),
        key_of("img", REPO, &d, None, &executable)
    );
}

/// A file outside the inputs is outside the key: the setup never saw it.
/// With the whole tree as its view, any file is in the key.
#[test]
fn only_the_view_is_keyed_and_the_whole_tree_keys_everything() {
    let mut d = declared(&[], Some("make deps"), &["package.json"]);
    let before = files().with("Makefile", "deps:\n\ttrue\n");
    let after = files().with("Makefile", "deps:\n\tPOISONED\n");
    assert_eq!(
        key_of("img", REPO, &d, None, &before),
        key_of("img", REPO, &d, None, &after)
    );
    d.whole_tree = true;
    assert_ne!(
        key_of("img", REPO, &d, None, &before),
        key_of("img", REPO, &d, None, &after)
    );
}

/// What the egress lets through is part of what the setup could install.
#[test]
fn the_allowed_hosts_are_part_of_the_key() {
    let d = declared(&["nodejs"], Some("npm ci"), &["package-lock.json"]);
    let with = |allowed: &[String]| {
        key(
            &KeyParts {
                image: "i",
                repository: REPO,
                declared: &d,
                ca_bundle: None,
                allowed,
            },
            &files(),
        )
        .unwrap()
    };
    let one = ["registry.example".to_owned()];
    let two = ["registry.example".to_owned(), "mirror.example".to_owned()];
    let two_reversed = ["mirror.example".to_owned(), "registry.example".to_owned()];
    assert_ne!(with(&[]), with(&one));
    assert_ne!(with(&one), with(&two));
    assert_eq!(with(&two), with(&two_reversed));
}
