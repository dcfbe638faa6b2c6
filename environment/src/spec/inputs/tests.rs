use super::make::*;
use super::*;
use crate::spec::testing::MapFiles;

/// Each setup's inputs against what is expected, every mismatch shown.
fn check<S: AsRef<str>>(files: &MapFiles, cases: &[(&str, &[S])]) {
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|(setup, expected)| {
            let found = inputs(files, Some(setup)).unwrap();
            let expected: Vec<&str> = expected.iter().map(AsRef::as_ref).collect();
            (found != expected)
                .then(|| format!("{setup}\n  found    {found:?}\n  expected {expected:?}"))
        })
        .collect();
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn known_files_present_are_inputs_whatever_the_setup() {
    let files = MapFiles::new()
        .with("package-lock.json", "{}")
        .with("Cargo.lock", "")
        .with("README.md", "")
        .with("src/package-lock.json", "{}");
    assert_eq!(
        inputs(&files, None).unwrap(),
        ["Cargo.lock", "package-lock.json"]
    );
    assert_eq!(
        inputs(&files, Some("make deps")).unwrap(),
        ["Cargo.lock", "package-lock.json"]
    );
}

#[test]
fn files_the_setup_names_are_inputs() {
    let files = MapFiles::new()
        .with("scripts/setup.sh", "#!/bin/sh")
        .with("requirements-dev.txt", "-r requirements/base.txt\n")
        .with("requirements/base.txt", "-c ../constraints.txt\nflask\n")
        .with("constraints.txt", "flask==3.0\n")
        .with("tools.lock", "x");
    let setup = "./scripts/setup.sh && pip install -r requirements-dev.txt --constraint='tools.lock' missing.txt $HOME/x";
    assert_eq!(
        inputs(&files, Some(setup)).unwrap(),
        [
            "constraints.txt",
            "requirements-dev.txt",
            "requirements/base.txt",
            "scripts/setup.sh",
            "tools.lock"
        ]
    );
}

/// A setup script runs others: what they are is part of the
/// environment too (red-team finding F2: a harmless `setup.sh` calling
/// a `tools/install.sh` that differed between branches kept one key).
#[test]
fn files_the_setups_scripts_name_are_inputs() {
    let files = MapFiles::new()
        .with(
            "setup.sh",
            "#!/bin/sh
set -e
sh tools/install.sh
. ./env.sh
",
        )
        .with(
            "tools/install.sh",
            "cd tools && ./fetch.py --into ../vendor
",
        )
        .with(
            "tools/fetch.py",
            "print('x')
",
        )
        .with(
            "env.sh",
            "export A=1
",
        )
        .with(
            "unrelated.sh",
            "x
",
        );
    assert_eq!(
        inputs(&files, Some("sh ./setup.sh")).unwrap(),
        [
            "env.sh",
            "setup.sh",
            "tools",
            "tools/fetch.py",
            "tools/install.sh"
        ]
    );
}

/// The second red-team round's bypasses of the above (N1): a script
/// named after `cd`, a script that is a link, and `make`'s Makefile.
#[test]
fn scripts_named_after_cd_through_links_and_by_make_are_inputs() {
    let files = MapFiles::new()
        .with("tools/install.sh", "sh ./fetch.sh\n")
        .with("tools/fetch.sh", "echo\n")
        .link("setup.sh", "tools/install.sh")
        .with("Makefile", "deps:\n\tsh scripts/deps.sh\n")
        .with("scripts/deps.sh", "echo\n")
        .with("web/package-lock.json", "{}")
        .with("web/build.js", "x\n")
        .with("lib/main.js", "x\n");
    assert_eq!(
        inputs(&files, Some("cd tools && sh install.sh")).unwrap(),
        ["tools", "tools/fetch.sh", "tools/install.sh"]
    );
    assert_eq!(
        inputs(&files, Some("sh ./setup.sh")).unwrap(),
        ["setup.sh", "tools/fetch.sh", "tools/install.sh"]
    );
    assert_eq!(
        inputs(&files, Some("make deps")).unwrap(),
        ["Makefile", "scripts/deps.sh"]
    );
    assert_eq!(
        inputs(&files, Some("make -C web && node lib/main")).unwrap(),
        [
            "Makefile",
            "lib/main.js",
            "scripts/deps.sh",
            "web",
            "web/build.js",
            "web/package-lock.json"
        ],
        "a directory named is where later words are looked up, and its files are inputs"
    );
}

/// The third red-team round's bypasses (M1): names the sandbox
/// resolves into the repository by an absolute path, `..`, `~`, a
/// chain of `cd`s, a linked directory, or quoting; a directory or a
/// module run as a program. Each case is the script a setup runs,
/// which the key must cover.
#[test]
fn names_resolve_as_the_sandbox_resolves_them() {
    let files = MapFiles::new()
        .with("tools/install.sh", "echo\n")
        .with("tools/sub/install.sh", "echo\n")
        .with("tools/Makefile", "deps:\n")
        .link("lnk", "tools")
        .link("abs.sh", "/workspace/tools/install.sh")
        .with("sp ace.sh", "echo\n");
    let cases: &[(&str, &[&str])] = &[
        ("sh /workspace/tools/install.sh", &["tools/install.sh"]),
        (
            "cd /workspace/tools && sh install.sh",
            &["tools", "tools/Makefile", "tools/install.sh"],
        ),
        (
            "make -s -C /workspace/tools deps",
            &["tools", "tools/Makefile", "tools/install.sh"],
        ),
        ("sh abs.sh", &["abs.sh", "tools/install.sh"]),
        ("sh ../workspace/tools/install.sh", &["tools/install.sh"]),
        (
            "cd ../workspace/tools && sh install.sh",
            &["tools", "tools/Makefile", "tools/install.sh"],
        ),
        (
            "sh ~/../../workspace/tools/install.sh",
            &["tools/install.sh"],
        ),
        (
            "sh $HOME/../../workspace/tools/install.sh",
            &["tools/install.sh"],
        ),
        (
            "cd tools && cd sub && sh install.sh",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.sh",
                "tools/sub",
                "tools/sub/install.sh",
            ],
        ),
        (
            "cd tools/sub && cd .. && sh install.sh",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.sh",
                "tools/sub",
                "tools/sub/install.sh",
            ],
        ),
        ("sh lnk/install.sh", &["lnk", "tools/install.sh"]),
        (
            "cd lnk && sh install.sh",
            &["lnk", "tools", "tools/Makefile", "tools/install.sh"],
        ),
        (
            "sh lnk/../tools/sub/install.sh",
            &["lnk", "tools/sub/install.sh"],
        ),
        ("sh \"sp ace.sh\"", &["sp ace.sh"]),
        ("sh ./sp\\ ace.sh", &["sp ace.sh"]),
        ("sh 'sp ace.sh'", &["sp ace.sh"]),
        (
            "bash -c 'pushd tools >/dev/null && sh install.sh'",
            &["tools", "tools/Makefile", "tools/install.sh"],
        ),
        ("sh $PWD/tools/install.sh", &["tools/install.sh"]),
        ("sh \"$(pwd)/tools/install.sh\"", &["tools/install.sh"]),
    ];
    check(&files, cases);
}

#[test]
fn a_directory_or_a_module_run_as_a_program_names_what_runs() {
    let files = MapFiles::new()
        .with("lib/index.js", "x\n")
        .with("lib/main/index.js", "x\n")
        .with(
            "lib/pkg/package.json",
            r#"{"name": "p", "main": "dist/start"}"#,
        )
        .with("lib/pkg/dist/start.js", "x\n")
        .with("tools/__main__.py", "x\n")
        .with("tools/install.py", "x\n")
        .with("rakefile", "namespace :deps\n")
        .with("Taskfile.dist.yml", "tasks:\n");
    let cases: &[(&str, &[&str])] = &[
        ("node lib", &["lib", "lib/index.js"]),
        ("node lib/main", &["lib/main", "lib/main/index.js"]),
        (
            "node lib/pkg",
            &["lib/pkg", "lib/pkg/dist/start.js", "lib/pkg/package.json"],
        ),
        ("python3 -m tools.install", &["tools/install.py"]),
        (
            "python3 -m tools",
            &["tools", "tools/__main__.py", "tools/install.py"],
        ),
        ("rake deps", &["rakefile"]),
        ("task deps", &["Taskfile.dist.yml"]),
    ];
    check(&files, cases);
}

/// The fourth red-team round's bypasses (F1): attached option
/// values, a process's view of itself under `/proc`, local projects
/// that requirement lines name, and the scripts package managers run
/// from their own files.
#[test]
fn attached_options_proc_self_and_the_package_managers_files_name_scripts() {
    let files = MapFiles::new()
        .with("tools/install.sh", "echo\n")
        .with("tools/install.py", "x\n")
        .with("tools/Makefile", "deps:\n")
        .with("req-dev.txt", "flask\n")
        .link("cwd.sh", "/proc/self/cwd/tools/install.sh");
    let cases: &[(&str, &[&str])] = &[
        (
            "make -Ctools deps",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.py",
                "tools/install.sh",
            ],
        ),
        ("python3 -mtools.install", &["tools/install.py"]),
        ("pip install -rreq-dev.txt", &["req-dev.txt"]),
        ("sh /proc/self/cwd/tools/install.sh", &["tools/install.sh"]),
        (
            "cd /proc/self/cwd/tools && sh install.sh",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.py",
                "tools/install.sh",
            ],
        ),
        (
            "cd tools && sh /proc/self/cwd/install.sh",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.py",
                "tools/install.sh",
            ],
        ),
        (
            "sh /proc/self/root/workspace/tools/install.sh",
            &["tools/install.sh"],
        ),
        ("sh /proc/1/cwd/tools/install.sh", &["tools/install.sh"]),
        ("sh cwd.sh", &["cwd.sh", "tools/install.sh"]),
        // Names made at run time from a directory the text names.
        (
            "ln -s tools l && sh l/install.sh",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.py",
                "tools/install.sh",
            ],
        ),
        (
            "cp -r tools /tmp/t && sh /tmp/t/install.sh",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.py",
                "tools/install.sh",
            ],
        ),
        (
            "run-parts tools",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.py",
                "tools/install.sh",
            ],
        ),
        (
            "HOME=/workspace/tools; sh ~/install.sh",
            &[
                "tools",
                "tools/Makefile",
                "tools/install.py",
                "tools/install.sh",
            ],
        ),
    ];
    check(&files, cases);

    let files = MapFiles::new()
        .with(
            "requirements.txt",
            "-e ./localpkg\n./other\nlp @ file:///workspace/third\nflask==3\n",
        )
        .with("localpkg/setup.py", "x\n")
        .with("other/pyproject.toml", "[project]\n")
        .with("third/setup.cfg", "[metadata]\n")
        .with(
            "package.json",
            r#"{"scripts": {"postinstall": "node scripts/post.js", "test": "jest"}}"#,
        )
        .with("scripts/post.js", "x\n")
        .with(".yarnrc", "yarn-path \"./y.js\"\n")
        .with("y.js", "x\n")
        .with("package-lock.json", r#"{"x": "node not-a-script.js"}"#)
        .with("not-a-script.js", "x\n");
    assert_eq!(
        inputs(&files, Some("pip install -r requirements.txt && npm ci")).unwrap(),
        [
            ".yarnrc",
            "localpkg",
            "localpkg/setup.py",
            "other",
            "other/pyproject.toml",
            "package-lock.json",
            "package.json",
            "requirements.txt",
            "scripts/post.js",
            "third",
            "third/setup.cfg",
            "y.js"
        ]
    );
}

/// The fifth red-team round's bypasses: Python runs compiled files
/// before their sources and looks a module up in several places; Node
/// tries `lib.js` before `lib/`; a nested file of a copied directory;
/// the shell's own `/proc/$$`.
#[test]
fn what_python_node_and_the_shell_would_run_instead_counts() {
    let files = MapFiles::new()
        .with("tools/install.py", "x\n")
        .with("tools/__init__.py", "x\n")
        .with("tools/__pycache__/install.cpython-311.pyc", "x")
        .with("tools/sub/install.sh", "echo\n")
        .with("tools.py", "x\n")
        .with("venv.pyc", "x")
        .with("lib.js", "x\n")
        .with("lib/index.js", "x\n")
        .with("pkg/mod/__init__.py", "x\n");
    let bytecode = ["tools/__pycache__/install.cpython-311.pyc", "venv.pyc"];
    let with_bytecode = |paths: &[&str]| {
        let mut all: Vec<String> = paths
            .iter()
            .chain(&bytecode)
            .map(|p| p.to_string())
            .collect();
        all.sort();
        all
    };
    let cases: &[(&str, Vec<String>)] = &[
        ("true", with_bytecode(&[])),
        ("python3 -m venv /home/agent/venv", with_bytecode(&[])),
        (
            "python3 -m tools.install",
            with_bytecode(&["tools.py", "tools/__init__.py", "tools/install.py"]),
        ),
        (
            "python3 -m tools",
            with_bytecode(&["tools", "tools.py", "tools/__init__.py", "tools/install.py"]),
        ),
        (
            "python3 -m pkg.mod",
            with_bytecode(&["pkg/mod", "pkg/mod/__init__.py"]),
        ),
        (
            "node lib",
            with_bytecode(&["lib", "lib.js", "lib/index.js"]),
        ),
        (
            "sh /proc/$$/cwd/tools/sub/install.sh",
            with_bytecode(&["tools/sub/install.sh"]),
        ),
        (
            "sh /proc/$PPID/cwd/tools/sub/install.sh",
            with_bytecode(&["tools/sub/install.sh"]),
        ),
        (
            "sh /proc/self/task/$$/cwd/tools/sub/install.sh",
            with_bytecode(&["tools/sub/install.sh"]),
        ),
    ];
    let cases: Vec<(&str, &[String])> = cases.iter().map(|(s, e)| (*s, e.as_slice())).collect();
    check(&files, &cases);
}

/// The sixth red-team round: an extension module Python loads before
/// the package's `__init__.py` (or before a module it imports), and a
/// `.pyc` that is a link to a file of another name.
#[test]
fn extension_modules_and_linked_bytecode_count() {
    let files = MapFiles::new()
        .with("tools/install.py", "x\n")
        .with("tools/__init__.cpython-311-x86_64-linux-gnu.so", "ELF")
        .with("shutil.cpython-311-x86_64-linux-gnu.so", "ELF")
        .link(
            "tools/__pycache__/install.cpython-311.pyc",
            "../../data/blob.bin",
        )
        .with("data/blob.bin", "x");
    assert_eq!(
        inputs(&files, Some("true")).unwrap(),
        [
            "data/blob.bin",
            "shutil.cpython-311-x86_64-linux-gnu.so",
            "tools/__init__.cpython-311-x86_64-linux-gnu.so",
            "tools/__pycache__/install.cpython-311.pyc"
        ]
    );
}

/// The seventh and eighth red-team rounds: make remakes what it is
/// asked for (or includes, or its own Makefile) from a sibling by its
/// built-in rules or the Makefile's own (`%: %.in`), and links a
/// `./libpthread.a` for `-lpthread`; Python runs a module `pkg.py`
/// before a namespace package `pkg/`.
#[test]
fn makes_built_in_rules_and_modules_beside_namespace_packages_count() {
    let files = MapFiles::new()
        .with(
            "Makefile",
            "-include local.mk\ndeps: tools/install\n\t./tools/install\n",
        )
        .with("Makefile.sh", "x")
        .with("local.mk.sh", "x")
        .with("tools/install", "x")
        .with("tools/install.sh", "x")
        .with("tools/install.c", "x")
        .with("RCS/Makefile,v", "x")
        .with("tools/install.in", "x")
        .with("libpthread.a", "x")
        .with("pkg.py", "x")
        .with("pkg/sub.py", "x")
        .with("pkg/sub/install.py", "x");
    check(
        &files,
        &[
            (
                "make -s deps",
                &[
                    "Makefile",
                    "Makefile.sh",
                    "RCS/Makefile,v",
                    "libpthread.a",
                    "local.mk.sh",
                    "tools/install",
                    "tools/install.c",
                    "tools/install.in",
                    "tools/install.sh",
                ],
            ),
            (
                "python3 -m pkg.sub.install",
                &["libpthread.a", "pkg.py", "pkg/sub.py", "pkg/sub/install.py"],
            ),
        ],
    );
}

/// The ninth red-team round: a Makefile's own pattern rules of any
/// shape make a named file from a source the key did not count.
#[test]
fn a_makefiles_own_pattern_rules_of_any_shape_count() {
    let makefile = "%: %-tmpl\n%: tmpl.%\ntools/%: zz/%\n\
                    tools/install: tools/%: yy/%.sh\nX := %.c\ndeps: tools/install\n\t./tools/install\n";
    let files = MapFiles::new()
        .with("Makefile", makefile)
        .with("tools/install-tmpl", "x")
        .with("tools/tmpl.install", "x")
        .with("zz/install", "x")
        .with("yy/install.sh", "x")
        .with("install.c", "x");
    check(
        &files,
        &[(
            "make -s deps",
            &[
                "Makefile",
                "tools/install-tmpl",
                "tools/tmpl.install",
                "yy/install.sh",
                "zz/install",
            ],
        )],
    );
    assert_eq!(
        make_rules("a := %\nb::=x\n%.o: %.c | dir\n\t%: not a rule\n", 10),
        [("%.o".to_owned(), "%.c".to_owned())]
    );
}

#[test]
fn words_are_split_as_the_shell_splits_them() {
    let text = "a\\ b 'c d' \"e f\" --x=g.txt ~/h $HOME/i ${HOME} $X/j *.k \"$Y\" '$z' $PWD/l /m/n";
    let words: Vec<String> = words::words(text).collect();
    // A word that holds a space is looked into too: it may be a
    // command (`bash -c '…'`).
    assert_eq!(
        words,
        [
            "a",
            "b",
            "a b",
            "c",
            "d",
            "c d",
            "e",
            "f",
            "e f",
            "g.txt",
            "~/h",
            "/home/agent/i",
            "/home/agent",
            "$z",
            "./l",
            "m/n",
            "/m/n"
        ]
    );
}

#[test]
fn a_link_loop_or_a_link_out_of_the_tree_ends() {
    let files = MapFiles::new()
        .link("a.sh", "b.sh")
        .link("b.sh", "a.sh")
        .link("out.sh", "../../etc/passwd")
        .link("abs.sh", "/etc/passwd");
    assert_eq!(
        inputs(&files, Some("sh a.sh && sh out.sh && sh abs.sh")).unwrap(),
        ["a.sh", "abs.sh", "b.sh", "out.sh"]
    );
}

#[test]
fn scripts_are_followed_within_a_bound() {
    let mut files = MapFiles::new();
    for i in 0..200 {
        files = files.with(&format!("s{i}.sh"), &format!("sh s{}.sh\n", i + 1));
    }
    let found = inputs(&files, Some("sh s0.sh")).unwrap();
    assert!(
        found.len() > 10 && found.len() <= MAX_SCRIPTS + 1,
        "{}",
        found.len()
    );
}

#[test]
fn includes_are_followed_within_the_repository_and_a_bound() {
    let mut files = MapFiles::new().with(
        "requirements.txt",
        "-r /etc/passwd\n-r ../../outside.txt\n-r https://x.invalid/r.txt\n-r chain0.txt\n",
    );
    for i in 0..100 {
        files = files.with(
            &format!("chain{i}.txt"),
            &format!("--requirement=chain{}.txt # next\n", i + 1),
        );
    }
    let closure = requirement_closure(&files, vec!["requirements.txt".into()]).unwrap();
    assert_eq!(closure.len(), MAX_REQUIREMENT_FILES);
    assert_eq!(closure[1].0, "chain0.txt");
    assert!(closure
        .iter()
        .all(|(path, _)| !path.contains("..") && !path.starts_with('/')));
}

#[test]
fn normalize_stays_inside() {
    assert_eq!(normalize("a/b", "../c.txt").as_deref(), Some("a/c.txt"));
    assert_eq!(normalize("", "./x/./y").as_deref(), Some("x/y"));
    assert_eq!(normalize("a", "../../x"), None);
    assert_eq!(normalize("", "."), None);
    assert_eq!(normalize("", "/x"), None);
}
