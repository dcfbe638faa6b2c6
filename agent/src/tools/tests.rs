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
    // An inner symlink is named, not followed.
    assert!(t
        .files
        .read(read("./inside-link"))
        .unwrap_err()
        .contains("symlink to src/lib.rs"));
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
    // The answer shows the change, numbered, with the lines around it.
    assert_eq!(
        edit("fn b() {}").unwrap(),
        "edited src/lib.rs at line 2:\n     1\tfn a() {}\n     2\tfn c() {}\n     3\tfn a() {}\n"
    );
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

/// Runs a file tool on another thread: a tool that blocks (the old
/// behaviour on a FIFO) fails the test instead of hanging it.
fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(10))
        .expect("the file tool blocked")
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a plain system call on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
}

#[test]
fn fifos_sockets_and_devices_are_refused_without_blocking() {
    let t = tree();
    mkfifo(&t.dir.path().join("pipe"));
    let _socket = std::os::unix::net::UnixListener::bind(t.dir.path().join("sock")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", t.dir.path().join("zero")).unwrap();
    let files = t.files.clone();
    let results = within_seconds(move || {
        let mut out = Vec::new();
        for path in ["pipe", "sock"] {
            out.push((path, files.read(read(path))));
            out.push((
                path,
                files.write(WriteArgs {
                    path: path.into(),
                    content: "x".into(),
                }),
            ));
            out.push((
                path,
                files.edit(EditArgs {
                    path: path.into(),
                    old_string: "a".into(),
                    new_string: "b".into(),
                }),
            ));
        }
        out.push(("zero", files.read(read("zero"))));
        out
    });
    for (path, result) in results {
        let error = result.expect_err(path);
        assert!(
            error.contains("not a regular file") || error.contains("symlink"),
            "{path}: {error}"
        );
    }
}

#[test]
fn a_fifo_with_a_writer_behind_it_is_not_read() {
    let t = tree();
    let fifo = t.dir.path().join("feed");
    mkfifo(&fifo);
    // A writer that would feed the host for ever.
    let feeder = std::thread::spawn(move || {
        if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&fifo) {
            use std::io::Write;
            let chunk = vec![b'a'; 1 << 16];
            while f.write_all(&chunk).is_ok() {}
        }
    });
    let files = t.files.clone();
    let error = within_seconds(move || files.read(read("feed"))).unwrap_err();
    assert!(error.contains("not a regular file"), "{error}");
    // Let the feeder go: a reader that comes and goes ends its open or
    // its writes (EPIPE), whichever it is at.
    while !feeder.is_finished() {
        use std::os::unix::fs::OpenOptionsExt;
        drop(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(t.dir.path().join("feed")),
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    feeder.join().unwrap();
}

#[test]
fn a_sparse_giant_is_refused_by_its_size() {
    let t = tree();
    let giant = std::fs::File::create(t.dir.path().join("Makefile")).unwrap();
    giant.set_len(3 << 30).unwrap();
    let error = t.files.read(read("Makefile")).unwrap_err();
    assert!(error.contains("too big"), "{error}");
    assert!(t
        .files
        .read_plain("Makefile", super::files::ReadLimit(1 << 20))
        .is_none());
}

#[test]
fn a_symlink_is_not_followed_and_says_where_it_points() {
    let t = tree();
    let error = t.files.read(read("inside-link")).unwrap_err();
    assert!(error.contains("symlink to src/lib.rs"), "{error}");
    let error = t
        .files
        .write(WriteArgs {
            path: "inside-link".into(),
            content: "replaced\n".into(),
        })
        .unwrap_err();
    assert!(error.contains("symlink"), "{error}");
    assert!(std::fs::read_to_string(t.dir.path().join("src/lib.rs"))
        .unwrap()
        .starts_with("fn a()"));
}

#[test]
fn what_the_host_writes_belongs_to_the_directorys_owner() {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test gives files away, which needs root (CI runs as root)");
    }
    let t = tree();
    std::os::unix::fs::chown(t.dir.path(), Some(54321), Some(54322)).unwrap();
    t.files
        .write(WriteArgs {
            path: "made/by/host.txt".into(),
            content: "x\n".into(),
        })
        .unwrap();
    for path in ["made", "made/by", "made/by/host.txt"] {
        let meta = std::fs::metadata(t.dir.path().join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (54321, 54322), "{path}");
    }
    // An existing file keeps its owner.
    t.files
        .write(WriteArgs {
            path: "README.md".into(),
            content: "changed\n".into(),
        })
        .unwrap();
    assert_eq!(
        std::fs::metadata(t.dir.path().join("README.md"))
            .unwrap()
            .uid(),
        0
    );
}

#[test]
fn a_crowded_directory_is_not_read_to_its_end() {
    let t = tree();
    let crowd = t.dir.path().join("crowd");
    std::fs::create_dir(&crowd).unwrap();
    for n in 0..5000 {
        std::fs::File::create(crowd.join(format!("f{n}"))).unwrap();
    }
    let listing = t
        .files
        .list(ListArgs {
            path: Some("crowd".into()),
            max_depth: Some(1),
        })
        .unwrap();
    assert!(
        listing.contains("[stopped at 2000 entries]"),
        "{}",
        &listing[listing.len() - 100..]
    );
}
