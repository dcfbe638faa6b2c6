//! The file tools on a real directory: path escapes of every kind are
//! refused by every tool; edits must hit exactly once.

use std::os::unix::fs::symlink;

use super::files::Files;
use super::schema::{self, EditArgs, GlobArgs, ListArgs, ReadArgs, WriteArgs};

struct Tree {
    dir: tempfile::TempDir,
    outside: tempfile::TempDir,
    files: Files,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("host-secret"), "HOST SECRET\n").unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "fn a() {}\nfn b() {}\nfn a() {}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "hello\n").unwrap();
    symlink(
        outside.path().join("host-secret"),
        dir.path().join("planted"),
    )
    .unwrap();
    symlink(outside.path(), dir.path().join("planted-dir")).unwrap();
    symlink("src/lib.rs", dir.path().join("inside-link")).unwrap();
    let files = Files::open(dir.path()).unwrap();
    Tree {
        dir,
        outside,
        files,
    }
}

fn read(path: &str) -> ReadArgs {
    ReadArgs {
        path: path.into(),
        start_line: None,
        end_line: None,
    }
}

const ESCAPES: &[&str] = &[
    "../outside.txt",
    "src/../../outside.txt",
    "/etc/passwd",
    "/workspace/../etc/passwd",
    "planted",
    "planted-dir/host-secret",
    "planted-dir/new-file",
];

#[test]
fn every_file_tool_refuses_every_escape() {
    let t = tree();
    for path in ESCAPES {
        let results = [
            ("read_file", t.files.read(read(path))),
            (
                "write_file",
                t.files.write(WriteArgs {
                    path: (*path).into(),
                    content: "pwned\n".into(),
                }),
            ),
            (
                "edit_file",
                t.files.edit(EditArgs {
                    path: (*path).into(),
                    old_string: "HOST".into(),
                    new_string: "PWNED".into(),
                }),
            ),
            (
                "list_files",
                t.files.list(ListArgs {
                    path: Some((*path).into()),
                    max_depth: None,
                }),
            ),
        ];
        for (tool, result) in results {
            let error = result.expect_err(&format!("{tool} must refuse {path}"));
            assert!(
                error.contains("refused") || error.contains("no such file"),
                "{tool} {path}: {error}"
            );
            assert!(!error.contains("HOST SECRET"), "{error}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(t.outside.path().join("host-secret")).unwrap(),
        "HOST SECRET\n",
        "the host file is untouched"
    );
    assert!(!t.outside.path().join("new-file").exists());
    // A glob lists the planted links as entries but never follows them.
    let found = t
        .files
        .glob(GlobArgs {
            pattern: "**/host-secret".into(),
        })
        .unwrap();
    assert!(found.starts_with("no file matches"), "{found}");
}

#[test]
fn paths_inside_the_tree_work_including_the_sandbox_prefix_and_inner_links() {
    let t = tree();
    assert_eq!(t.files.read(read("README.md")).unwrap(), "     1\thello\n");
    assert_eq!(
        t.files.read(read("/workspace/README.md")).unwrap(),
        "     1\thello\n"
    );
    assert!(t
        .files
        .read(read("./inside-link"))
        .unwrap()
        .contains("fn b()"));
    let part = t
        .files
        .read(ReadArgs {
            path: "src/lib.rs".into(),
            start_line: Some(2),
            end_line: Some(2),
        })
        .unwrap();
    assert_eq!(part, "     2\tfn b() {}\n");
    t.files
        .write(WriteArgs {
            path: "new/dir/file.txt".into(),
            content: "x\n".into(),
        })
        .unwrap();
    assert!(t.dir.path().join("new/dir/file.txt").is_file());
    let listing = t
        .files
        .list(ListArgs {
            path: None,
            max_depth: Some(1),
        })
        .unwrap();
    assert!(
        listing.contains("src/\n") && listing.contains("README.md\n"),
        "{listing}"
    );
    let globbed = t
        .files
        .glob(GlobArgs {
            pattern: "src/**/*.rs".into(),
        })
        .unwrap();
    assert_eq!(globbed, "src/lib.rs\n");
}

#[test]
fn an_edit_must_match_exactly_once() {
    let t = tree();
    let edit = |old: &str| {
        t.files.edit(EditArgs {
            path: "src/lib.rs".into(),
            old_string: old.into(),
            new_string: "fn c() {}".into(),
        })
    };
    let error = edit("fn z() {}").unwrap_err();
    assert!(error.contains("does not occur"), "{error}");
    let error = edit("fn a() {}").unwrap_err();
    assert!(
        error.contains("occurs 2 times") && error.contains("lines 1, 3"),
        "{error}"
    );
    assert_eq!(edit("fn b() {}").unwrap(), "edited src/lib.rs at line 2");
    assert_eq!(
        std::fs::read_to_string(t.dir.path().join("src/lib.rs")).unwrap(),
        "fn a() {}\nfn c() {}\nfn a() {}\n"
    );
}

#[test]
fn arguments_are_checked_against_the_schema_before_anything_runs() {
    let error = schema::validate("read_file", "{\"path\": ").unwrap_err();
    assert!(error.contains("not valid JSON"), "{error}");
    let error = schema::validate("read_file", "{\"path\": \"a\", \"start_line\": 0}").unwrap_err();
    assert!(error.contains("start_line"), "{error}");
    let error = schema::validate("bash", "{\"command\": \"ls\", \"rm\": true}").unwrap_err();
    assert!(error.contains("rm"), "{error}");
    let error = schema::validate(
        "finish",
        &format!("{{\"summary\": \"s\", \"title\": \"{}\"}}", "t".repeat(200)),
    )
    .unwrap_err();
    assert!(error.contains("title"), "{error}");
    let error = schema::validate("launch_missiles", "{}").unwrap_err();
    assert!(
        error.contains("no tool named") && error.contains("read_file"),
        "{error}"
    );
    assert!(
        schema::validate("list_files", "").is_ok(),
        "no arguments is an empty object"
    );
}
