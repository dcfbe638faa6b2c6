use super::*;
use crate::spec::error::Location;
use crate::spec::testing::MapFiles;
use crate::spec::FilesError;

const TOML: &str = "[environment]\npackages = [\"npm\", \"nodejs\", \"npm\"]\nsetup = \"npm ci && ./scripts/build.sh\"\ntest = \"npm test\"\n";
const DEVCONTAINER: &str = r#"{ "postCreateCommand": "npm ci" }"#;

fn repository() -> MapFiles {
    MapFiles::new()
        .with("package.json", r#"{"scripts": {"test": "jest"}}"#)
        .with("package-lock.json", "{}")
        .with("scripts/build.sh", "")
}

#[test]
fn forgehand_toml_comes_first_and_is_the_whole_declaration() {
    let files = repository()
        .with(".forgehand.toml", TOML)
        .with(".devcontainer/devcontainer.json", DEVCONTAINER);
    let d = declared(&files, true).unwrap().unwrap();
    assert_eq!(
        d,
        Declared {
            packages: vec![
                DebianPackage::new("nodejs").unwrap(),
                DebianPackage::new("npm").unwrap()
            ],
            setup: Some("npm ci && ./scripts/build.sh".into()),
            test: Some("npm test".into()),
            source: Source::ForgehandToml,
            // What the setup line names is not guessed: a script it runs
            // is in the view only when `inputs` adds it.
            inputs: vec!["package-lock.json".into(), "package.json".into()],
            whole_tree: false,
        }
    );
    assert_eq!(d.source.to_string(), ".forgehand.toml");
    // Without a declared test none is guessed, even with detection on.
    let files = repository().with(".forgehand.toml", "[environment]\nsetup = \"npm ci\"\n");
    let d = declared(&files, true).unwrap().unwrap();
    assert_eq!(d.test, None);
    assert!(d.packages.is_empty());
}

#[test]
fn an_empty_environment_table_turns_detection_off() {
    let files = repository().with(".forgehand.toml", "[environment]\n");
    let d = declared(&files, true).unwrap().unwrap();
    assert_eq!(d.source, Source::ForgehandToml);
    assert!(!d.needs_setup());
    assert_eq!(d.test, None);
}

#[test]
fn a_forgehand_toml_without_the_table_falls_through() {
    let files = repository()
        .with(".forgehand.toml", "[review]\nlabels = []\n")
        .with(".devcontainer/devcontainer.json", DEVCONTAINER);
    let d = declared(&files, true).unwrap().unwrap();
    assert_eq!(d.source, Source::Devcontainer(DevcontainerPath::Folder));
}

#[test]
fn a_devcontainer_comes_second_with_the_detected_test_and_packages() {
    let files = repository().with(".devcontainer/devcontainer.json", DEVCONTAINER);
    let d = declared(&files, true).unwrap().unwrap();
    assert_eq!(d.source, Source::Devcontainer(DevcontainerPath::Folder));
    assert_eq!(d.source.to_string(), ".devcontainer/devcontainer.json");
    assert_eq!(d.setup.as_deref(), Some("npm ci"));
    assert_eq!(d.test.as_deref(), Some("npm test"));
    assert_eq!(d.packages.len(), 2);
    assert_eq!(d.inputs, ["package-lock.json", "package.json"]);

    // The test is the toolchain's usual one, not one that assumes the
    // detected setup ran.
    let python = MapFiles::new().with("requirements.txt", "pytest\n").with(
        ".devcontainer.json",
        r#"{"onCreateCommand": "pip install --user -r requirements.txt"}"#,
    );
    let d = declared(&python, true).unwrap().unwrap();
    assert_eq!(d.source, Source::Devcontainer(DevcontainerPath::Root));
    assert_eq!(d.test.as_deref(), Some("python3 -m pytest"));

    // Detection off: the devcontainer's setup alone.
    let d = declared(&files, false).unwrap().unwrap();
    assert_eq!(d.setup.as_deref(), Some("npm ci"));
    assert_eq!(d.test, None);
    assert!(d.packages.is_empty());
    assert_eq!(
        d.inputs,
        ["package-lock.json", "package.json"],
        "the key still covers the lockfiles"
    );
}

#[test]
fn the_folder_devcontainer_wins_over_the_root_one() {
    let files = MapFiles::new()
        .with(
            ".devcontainer/devcontainer.json",
            r#"{"postCreateCommand": "a"}"#,
        )
        .with(".devcontainer.json", r#"{"postCreateCommand": "b"}"#);
    assert_eq!(
        declared(&files, false).unwrap().unwrap().setup.as_deref(),
        Some("a")
    );
}

#[test]
fn a_devcontainer_without_commands_leaves_it_to_detection() {
    let files = repository().with(".devcontainer/devcontainer.json", r#"{"image": "node"}"#);
    let d = declared(&files, true).unwrap().unwrap();
    assert_eq!(
        d.source,
        Source::Detected(vec![crate::spec::Toolchain::Npm])
    );
    assert_eq!(declared(&files, false).unwrap(), None);
}

#[test]
fn detection_off_declares_nothing_without_a_file() {
    assert_eq!(declared(&repository(), false).unwrap(), None);
    assert!(declared(&repository(), true).unwrap().is_some());
}

#[test]
fn errors_in_the_files_are_errors_not_fallbacks() {
    let files = repository()
        .with(".forgehand.toml", "[environment]\nsetup = 1\n")
        .with(".devcontainer/devcontainer.json", DEVCONTAINER);
    let error = declared(&files, true).unwrap_err();
    assert!(matches!(
        error,
        DeclareError::Invalid {
            file: DeclFile::ForgehandToml,
            at: Location { line: 2, .. },
            ..
        }
    ));
    let files = repository().with(
        ".devcontainer/devcontainer.json",
        "{\n\"postCreateCommand\": 1}",
    );
    let error = declared(&files, true).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(".devcontainer/devcontainer.json, line 2, column"),
        "{error}"
    );
}

#[test]
fn oversized_declarations_are_errors_without_a_whole_read() {
    for path in [
        ".forgehand.toml",
        ".devcontainer/devcontainer.json",
        ".devcontainer.json",
    ] {
        let files = repository().huge(path, MAX_DECLARATION_BYTES + 1);
        let error = declared(&files, true).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("{path} is larger than 65536 bytes, the most Forgehand reads of it")
        );
        assert!(files
            .reads()
            .iter()
            .any(|(read, max)| read == path && *max == MAX_DECLARATION_BYTES));
    }
    // At the bound exactly it is read.
    let mut text = String::from("[environment]\nsetup = 'make'\n");
    text.push_str(&"#".repeat(MAX_DECLARATION_BYTES as usize - text.len()));
    let files = MapFiles::new().with(".forgehand.toml", &text);
    assert!(declared(&files, true).unwrap().is_some());
}

#[test]
fn an_unreadable_tree_is_an_error() {
    let files = repository().broken(".forgehand.toml");
    assert!(matches!(
        declared(&files, true),
        Err(DeclareError::Files(FilesError::Read { .. }))
    ));
}

#[test]
fn declared_round_trips_through_serde() {
    let d = declared(&repository(), true).unwrap().unwrap();
    let json = serde_json::to_string(&d).unwrap();
    assert!(json.contains("\"detected\":[\"npm\"]"), "{json}");
    let back: Declared = serde_json::from_str(&json).unwrap();
    assert_eq!(back, d);
    let bad = json.replace("\"nodejs\"", "\"-oAPT\"");
    assert!(serde_json::from_str::<Declared>(&bad).is_err());
}
