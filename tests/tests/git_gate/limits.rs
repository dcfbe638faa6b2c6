//! The gate's limits on what the host reads of the agent's tree: special
//! files left out, files above the size limit, sparse files and hard
//! links, too many entries or symlinks, nesting deeper than git walks,
//! and what git ignores (never counted, never read).

use super::*;

#[test]
fn pipes_and_sockets_are_left_out_and_block_nothing() {
    run_with(
        Case {
            script: "mkdir -p docs && echo notes > docs/notes.md\nmkfifo pipe docs/.gitattributes src/.gitignore",
            policy: STRICT,
            findings: vec![
                "LeftOut docs/.gitattributes",
                "LeftOut pipe",
                "LeftOut sock",
                "LeftOut src/.gitignore",
            ],
            outcome: Outcome::Pushed,
        },
        Extra {
            then: |tree| {
                std::os::unix::net::UnixListener::bind(tree.join("sock")).unwrap();
            },
            ..Extra::default()
        },
    );
}

#[test]
fn a_huge_sparse_file_is_too_large_and_never_read() {
    in_small_address_space(
        "limits::a_huge_sparse_file_is_too_large_and_never_read",
        || {
            run(Case {
                script: "truncate -s 3G data.bin",
                policy: ALLOW,
                findings: vec!["TooLarge data.bin 3221225472"],
                outcome: Outcome::Refused(RefusalReason::TooLarge),
            })
        },
    );
}

#[test]
fn a_huge_sparse_makefile_is_too_large_and_never_read() {
    in_small_address_space(
        "limits::a_huge_sparse_makefile_is_too_large_and_never_read",
        || {
            run(Case {
                script: "truncate -s 3G Makefile",
                policy: ALLOW,
                // Refused for its size before the diff reads anything.
                findings: vec!["TooLarge Makefile 3221225472"],
                outcome: Outcome::Refused(RefusalReason::TooLarge),
            })
        },
    );
}

#[test]
fn too_many_entries_refuse_the_push() {
    run_with(
        Case {
            script: "mkdir many && cd many && for i in $(seq 300); do : > f$i; done",
            policy: ALLOW,
            findings: vec!["TooLarge 200 entries"],
            outcome: Outcome::Refused(RefusalReason::TooLarge),
        },
        Extra {
            limits: TreeLimits {
                max_entries: 200,
                ..TreeLimits::default()
            },
            ..Extra::default()
        },
    );
}

#[test]
fn too_many_symlinks_refuse_the_push() {
    run_with(
        Case {
            script:
                "mkdir links && cd links && for i in $(seq 100); do ln -s ../README.md l$i; done",
            policy: ALLOW,
            findings: vec!["TooLarge 50 recorded"],
            outcome: Outcome::Refused(RefusalReason::TooLarge),
        },
        Extra {
            limits: TreeLimits {
                max_recorded: 50,
                ..TreeLimits::default()
            },
            ..Extra::default()
        },
    );
}

/// Build output git ignores is not walked, counted or size-checked: it is
/// not committed. The limits here are far below what `target/` holds.
#[test]
fn ignored_build_output_is_not_walked() {
    run_with(
        Case {
            script: "printf 'target/\\n' > .gitignore\nmkdir -p target/debug\nfor i in $(seq 300); do : > target/debug/f$i; done\ntruncate -s 2M target/debug/app\nmkfifo target/debug/pipe",
            policy: ALLOW,
            findings: vec!["Sensitive .gitignore"],
            outcome: Outcome::Pushed,
        },
        Extra {
            limits: TreeLimits {
                max_entries: 200,
                max_file_bytes: 1 << 20,
                ..TreeLimits::default()
            },
            ..Extra::default()
        },
    );
}

#[test]
fn a_file_above_the_limit_is_refused_by_path_and_size() {
    run_with(
        Case {
            script: "head -c 3000 /dev/zero > blob.dat\nhead -c 100 /dev/zero > small.dat",
            policy: ALLOW,
            findings: vec!["TooLarge blob.dat 3000"],
            outcome: Outcome::Refused(RefusalReason::TooLarge),
        },
        Extra {
            limits: TreeLimits {
                max_file_bytes: 2048,
                ..TreeLimits::default()
            },
            ..Extra::default()
        },
    );
}

/// Sparse files cost the sandbox's disk nothing, but the host's diff and
/// commit would read (and deflate) every byte of each: past what the tree
/// may hold, as the host reads it, the push is refused before libgit2
/// reads any of them.
#[test]
fn sparse_files_adding_up_past_the_total_are_refused_unread() {
    run_with(
        Case {
            script: "mkdir data
for i in 1 2 3 4 5; do truncate -s 1000 data/f$i; done",
            policy: ALLOW,
            findings: vec!["TooLarge total 5327"],
            outcome: Outcome::Refused(RefusalReason::TooLarge),
        },
        Extra {
            limits: TreeLimits {
                max_file_bytes: 2048,
                max_total_bytes: 4096,
                ..TreeLimits::default()
            },
            ..Extra::default()
        },
    );
}

/// Red-team round 2: a hundred hard links to one 99 MiB sparse file
/// stayed under the tree's total (the disk's size) and cost the host
/// minutes of reading; what the agent adds is bounded on its own.
#[test]
fn hard_links_to_a_sparse_file_past_what_may_be_added_are_refused_unread() {
    run_with(
        Case {
            script: "truncate -s 1000 big
for i in 1 2 3 4 5; do ln big link$i; done",
            policy: ALLOW,
            findings: vec!["TooLarge added 6000"],
            outcome: Outcome::Refused(RefusalReason::TooLarge),
        },
        Extra {
            limits: TreeLimits {
                max_file_bytes: 2048,
                max_added_bytes: 4096,
                ..TreeLimits::default()
            },
            ..Extra::default()
        },
    );
}

/// A 200 GiB sparse file where the environment left it, and, when
/// `excluded`, the host's exclusion of it in the git directory's
/// `info/exclude` (as a job with that environment has).
fn environment_file(excluded: bool) -> impl FnOnce(&Path, &Path) {
    move |tree, git_dir| {
        let file = std::fs::File::create(tree.join("ws_sparse")).unwrap();
        file.set_len(200 << 30).unwrap();
        if excluded {
            std::fs::create_dir_all(git_dir.join("info")).unwrap();
            std::fs::write(git_dir.join("info/exclude"), "/ws_sparse\n").unwrap();
        }
    }
}

/// Runs `script` as the agent on a job `prepare`d, and checks findings,
/// outcome and the server.
fn run_prepared(
    limits: TreeLimits,
    prepare: impl FnOnce(&Path, &Path),
    script: &'static str,
    findings: &[&str],
    outcome: Outcome,
) {
    let mut job = Job::prepared(limits, prepare);
    job.agent(script, &[]);
    let (report, got) = job.deliver(ALLOW, MESSAGE);
    assert_eq!(listed(&report), findings, "findings: {report:#?}");
    assert_eq!(got, outcome);
    assert_eq!(job.on_server(), outcome == Outcome::Pushed);
    job.assert_no_canary_ran();
}

/// Red-team F7: a 200 GiB sparse file an environment's setup left in
/// `/workspace`, which the host excludes (it is never committed), made
/// every job fail `too_large`: the tree's total counted it. A file git
/// ignores and does not track does not count; the same file not ignored
/// still refuses, unread.
#[test]
fn a_huge_file_git_ignores_and_never_commits_does_not_count() {
    in_small_address_space(
        "limits::a_huge_file_git_ignores_and_never_commits_does_not_count",
        || {
            run_prepared(
                TreeLimits::default(),
                environment_file(true),
                "echo 'pub fn answer() -> u32 { 42 }' > src/lib.rs",
                &[],
                Outcome::Pushed,
            );
            run_prepared(
                TreeLimits::default(),
                environment_file(false),
                "echo 'pub fn answer() -> u32 { 42 }' > src/lib.rs",
                &["TooLarge ws_sparse 214748364800"],
                Outcome::Refused(RefusalReason::TooLarge),
            );
        },
    );
}

/// The agent's own ignored files do not count either; what it adds
/// beside them still does, measured against the snapshot's total without
/// the environment's ignored file (not hidden by it).
#[test]
fn what_the_agent_adds_beside_an_ignored_huge_file_still_counts() {
    in_small_address_space(
        "limits::what_the_agent_adds_beside_an_ignored_huge_file_still_counts",
        || {
            run_prepared(
                TreeLimits::default(),
                environment_file(true),
                "printf '*.bin\\n' > .gitignore\ntruncate -s 200G data.bin\necho notes > README.md",
                // A dot-file: held, and listed as pushed with allow-sensitive.
                &["Sensitive .gitignore"],
                Outcome::Pushed,
            );
            run_prepared(
                TreeLimits {
                    max_added_bytes: 4 << 20,
                    ..TreeLimits::default()
                },
                environment_file(true),
                "for i in 1 2 3; do truncate -s 2M data$i.dat; done",
                &["TooLarge added 6291456"],
                Outcome::Refused(RefusalReason::TooLarge),
            );
        },
    );
}

/// More ignored files above the limit than a report lists are not
/// refused for their number: each is asked about (up to ten thousand),
/// as one would be alone.
#[test]
fn many_ignored_files_above_the_limit_are_not_refused_for_their_number() {
    run_with(
        Case {
            script: "printf '*.bin\\n' > .gitignore\nfor i in $(seq 150); do truncate -s 3000 f$i.bin; done\necho notes > README.md",
            policy: ALLOW,
            findings: vec!["Sensitive .gitignore"],
            outcome: Outcome::Pushed,
        },
        Extra {
            limits: TreeLimits {
                max_file_bytes: 2048,
                ..TreeLimits::default()
            },
            ..Extra::default()
        },
    );
    // Not ignored, they are refused: a hundred listed, the rest counted.
    let mut job = Job::new(TreeLimits {
        max_file_bytes: 2048,
        ..TreeLimits::default()
    });
    job.agent(
        "for i in $(seq 150); do truncate -s 3000 f$i.dat; done",
        &[],
    );
    let (report, outcome) = job.deliver(ALLOW, MESSAGE);
    assert_eq!(outcome, Outcome::Refused(RefusalReason::TooLarge));
    assert_eq!(report.too_large.len(), 101, "{report:#?}");
    assert_eq!(report.too_large[100], Oversize::MoreFiles { more: 50 });
    assert!(!job.on_server());
}

/// A sibling of red-team F5, on the agent's side: directories nested
/// deeper than libgit2 walks (it stops at a hundredth level) made the
/// gate fail instead of deciding, and 5,000 levels kept it asking git
/// what is ignored, for every level again, for minutes. The walk refuses
/// a tree nested deeper than `max_depth` as too large, before asking.
///
/// "At once" is not timed here: `Job::deliver` fails a gate that takes a
/// minute (a hang detector, where this one takes well under a second),
/// and the walk that asked at every level takes longer than that at
/// 5,000 levels.
#[test]
fn a_tree_nested_deeper_than_git_walks_is_refused_at_once() {
    for depth in [100, 5000] {
        let mut job = Job::new(TreeLimits::default());
        job.agent(
            &format!(
                "python3 -c \"import os\nfor i in range({depth}): os.mkdir('d'); os.chdir('d')\nopen('f.txt', 'w').write('x')\""
            ),
            &[],
        );
        let (report, outcome) = job.deliver(ALLOW, MESSAGE);
        assert_eq!(
            listed(&report),
            ["TooLarge 99 deep"],
            "{depth}: {report:#?}"
        );
        assert_eq!(outcome, Outcome::Refused(RefusalReason::TooLarge));
        assert!(!job.on_server());
    }
    // As deep as git walks is fine.
    run(Case {
        script: "python3 -c \"import os\nos.mkdir('tests'); os.chdir('tests')\nfor i in range(98): os.mkdir('d'); os.chdir('d')\nopen('f.txt', 'w').write('x')\"",
        policy: ALLOW,
        findings: vec![],
        outcome: Outcome::Pushed,
    });
}

/// A file the checkout already held above the limit is not the agent's
/// doing: left alone, it does not count, unless it sits at a watched
/// path (above the limit, it is not hashed, so a change of the same size
/// would not show).
#[test]
fn what_the_repository_already_held_above_the_limit_counts_only_when_watched() {
    let limits = TreeLimits {
        // src/lib.rs (30 bytes) and .gitmodules (78) are above it.
        max_file_bytes: 25,
        ..TreeLimits::default()
    };
    run_with(
        Case {
            script: "echo notes > notes.md",
            policy: ALLOW,
            findings: vec!["TooLarge .gitmodules 78"],
            outcome: Outcome::Refused(RefusalReason::TooLarge),
        },
        Extra {
            limits,
            ..Extra::default()
        },
    );
    run_with(
        Case {
            script: "echo '// more' >> src/lib.rs",
            policy: ALLOW,
            findings: vec!["TooLarge .gitmodules 78", "TooLarge src/lib.rs 38"],
            outcome: Outcome::Refused(RefusalReason::TooLarge),
        },
        Extra {
            limits,
            ..Extra::default()
        },
    );
}
