//! The evaluation dataset builds, and each instance's gold patch and test
//! patch apply to its base checkout, as `forgehand eval` will apply them:
//! checked without running any project's tests, so that a broken dataset
//! shows here, quickly, rather than as a failed evaluation.

use std::path::Path;
use std::process::Command;

use forgehand_tests::eval_dataset::{build, write_jsonl};
use serde_json::Value;

/// `git apply --check` of `patch` (saved beside the repositories) in `repo`.
fn applies(repo: &Path, patch: &str, name: &str) -> Result<(), String> {
    let file = repo.parent().unwrap().join(name);
    std::fs::write(&file, patch).unwrap();
    let out = Command::new("git")
        .args(["apply", "--check"])
        .arg(&file)
        .current_dir(repo)
        .output()
        .expect("git runs");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn the_dataset_builds_and_its_patches_apply() {
    let dir = tempfile::tempdir().unwrap();
    let instances = build(dir.path());
    assert!(instances.len() >= 5, "{} instances", instances.len());

    let mut ids: Vec<&str> = instances.iter().map(|i| i.instance_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), instances.len(), "instance ids repeat: {ids:?}");

    for instance in &instances {
        let id = &instance.instance_id;
        let git = git2::Repository::open(&instance.repo).unwrap();
        let head = git.head().unwrap().peel_to_commit().unwrap();
        assert_eq!(head.id().to_string(), instance.base_commit, "{id}");
        assert_eq!(head.parent_count(), 0, "{id}: one commit only");
        assert!(
            !instance.fail_to_pass.is_empty() && (2..=5).contains(&instance.pass_to_pass.len()),
            "{id}: {:?} {:?}",
            instance.fail_to_pass,
            instance.pass_to_pass
        );
        assert!(instance.test_command.contains("{tests}"), "{id}");

        let patch = format!("{id}.patch");
        let test_patch = format!("{id}.test.patch");
        applies(&instance.repo, &instance.patch, &patch)
            .unwrap_or_else(|e| panic!("{id}: the gold patch does not apply: {e}"));
        applies(&instance.repo, &instance.test_patch, &test_patch)
            .unwrap_or_else(|e| panic!("{id}: the test patch does not apply: {e}"));

        let (file, old, _) = &instance.fix;
        let text = std::fs::read_to_string(instance.repo.join(file)).unwrap();
        assert_eq!(
            text.matches(old.as_str()).count(),
            1,
            "{id}: the fix's old string"
        );
    }

    let jsonl = dir.path().join("dataset.jsonl");
    write_jsonl(&instances, &jsonl);
    let rows: Vec<Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows.len(), instances.len());
    for (row, instance) in rows.iter().zip(&instances) {
        let encoded = row["FAIL_TO_PASS"]
            .as_str()
            .expect("FAIL_TO_PASS as a string");
        let fail_to_pass: Vec<String> = serde_json::from_str(encoded).unwrap();
        assert_eq!(fail_to_pass, instance.fail_to_pass);
        assert!(row["PASS_TO_PASS"].is_array());
        assert_eq!(row["base_commit"], instance.base_commit.as_str());
    }
}
