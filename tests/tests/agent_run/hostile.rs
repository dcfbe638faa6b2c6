//! The host against the agent and the repository it works on: no file
//! tool reaches a host file, the gate runs before the commit, the
//! repository's own `.forgehand.toml` configures nothing, a FIFO holds
//! nothing up and a full disk fills nothing of the host's.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn no_file_tool_reaches_a_host_file() {
    let project = Project::new();
    let host = project.root.path().join("host-secret.txt");
    std::fs::write(&host, "HOST SECRET\n").unwrap();
    // Planted in the repository: a link to the host file and to its directory.
    let repo = project.repo();
    std::os::unix::fs::symlink(&host, repo.join("planted")).unwrap();
    std::os::unix::fs::symlink(project.root.path(), repo.join("planted-dir")).unwrap();
    {
        let git = git2::Repository::open(&repo).unwrap();
        let mut index = git.index().unwrap();
        index.add_path(Path::new("planted")).unwrap();
        index.add_path(Path::new("planted-dir")).unwrap();
        index.write().unwrap();
        let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("Dev", "dev@example.invalid").unwrap();
        let parent = git.head().unwrap().peel_to_commit().unwrap();
        git.commit(Some("HEAD"), &sig, &sig, "links", &tree, &[&parent])
            .unwrap();
    }
    let attempts = [
        ("read_file", json!({"path": "planted"})),
        ("read_file", json!({"path": "../host-secret.txt"})),
        ("read_file", json!({"path": host.to_str().unwrap()})),
        ("read_file", json!({"path": "planted-dir/host-secret.txt"})),
        ("write_file", json!({"path": "planted", "content": "pwned"})),
        (
            "write_file",
            json!({"path": "planted-dir/new.txt", "content": "pwned"}),
        ),
        (
            "edit_file",
            json!({"path": "planted", "old_string": "HOST", "new_string": "PWNED"}),
        ),
        (
            "edit_file",
            json!({"path": "../host-secret.txt", "old_string": "HOST", "new_string": "PWNED"}),
        ),
        ("list_files", json!({"path": "planted-dir"})),
        ("list_files", json!({"path": "/etc"})),
        ("glob", json!({"pattern": "planted-dir/*"})),
    ];
    let mut steps: Vec<Step> = attempts
        .iter()
        .map(|(t, a)| Step::call(t, a.clone()))
        .collect();
    steps.push(Step::finish("nothing", "nothing"));
    let server = ModelServer::start(steps).await.unwrap();
    let (_, report) = tokio::task::block_in_place(|| project.run(&server, "openai", QUICK_RETRIES));
    assert_eq!(report["reason"], "no_changes", "{report:#}");
    let events = transcript(&report);
    let tools = tool_events(&events);
    for (event, (tool, args)) in tools.iter().zip(&attempts) {
        let result = event["result"].as_str().unwrap();
        if *tool == "glob" {
            assert!(
                result.starts_with("no file matches"),
                "glob follows no link: {result}"
            );
        } else {
            assert_eq!(event["is_error"], true, "{tool} {args}: {result}");
            assert!(result.contains("refused"), "{tool} {args}: {result}");
        }
    }
    assert_eq!(std::fs::read_to_string(&host).unwrap(), "HOST SECRET\n");
    assert!(!project.root.path().join("new.txt").exists());
    let raw = std::fs::read_to_string(report["transcript"].as_str().unwrap()).unwrap();
    assert!(
        !raw.contains("HOST SECRET"),
        "no host file content reached the model"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_goes_through_the_gate_before_it_commits() {
    let project = Project::new();
    let steps = vec![
        Step::call(
            "write_file",
            json!({"path": ".github/workflows/ci.yml", "content": "on: push\n"}),
        ),
        Step::finish("added CI", "Add CI"),
    ];
    let server = ModelServer::start(steps).await.unwrap();
    let (code, report) =
        tokio::task::block_in_place(|| project.run(&server, "openai", QUICK_RETRIES));
    assert_eq!(code, 1);
    assert_eq!(report["reason"], "sensitive", "{report:#}");
    let message = report["message"].as_str().unwrap();
    assert!(message.contains(".github/workflows/ci.yml"), "{message}");
    // Held, not lost: committed at a ref of its own, on no branch, and
    // the report says how to take it.
    assert!(report["branch"].is_null(), "no branch holds it: {report:#}");
    let held = report["held"]
        .as_str()
        .unwrap_or_else(|| panic!("the held change's ref: {report:#}"));
    assert!(
        held.starts_with("refs/forgehand/held/forgehand/run-"),
        "{held}"
    );
    assert!(
        message.contains(&format!("`git branch <name> {held}` takes it as it is"))
            && message.contains("--allow-sensitive commits it on a branch next time"),
        "{message}"
    );
    let repo = git2::Repository::open(project.repo()).unwrap();
    let kept = repo.find_reference(held).unwrap().peel_to_commit().unwrap();
    assert_eq!(kept.id().to_string(), report["commit"].as_str().unwrap());
    assert!(kept
        .tree()
        .unwrap()
        .get_path(Path::new(".github/workflows/ci.yml"))
        .is_ok());
    let branches: Vec<String> = repo
        .branches(Some(git2::BranchType::Local))
        .unwrap()
        .map(|b| b.unwrap().0.name().unwrap().unwrap().to_owned())
        .collect();
    assert_eq!(branches, ["main"], "no branch was made");
    let server = ModelServer::start(vec![
        Step::call("write_file", json!({"path": "notes.txt", "content": "token = \"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB\"\n"})),
        Step::finish("notes", "Notes"),
    ])
    .await
    .unwrap();
    let (_, report) = tokio::task::block_in_place(|| project.run(&server, "openai", QUICK_RETRIES));
    assert_eq!(report["reason"], "secret", "{report:#}");
    let message = report["message"].as_str().unwrap();
    assert!(
        message.contains("`notes.txt`:1") && !message.contains("ghp_"),
        "{message}"
    );
}

/// A TCP listener on 127.0.0.1 that counts the connections made to it and
/// closes each at once.
struct Canary {
    url: String,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Canary {
    fn start() -> Canary {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                drop(stream);
            }
        });
        Canary { url, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forgehand_toml_in_the_repository_does_not_configure_the_run() {
    let project = Project::new();
    let canary = Canary::start();
    let planted = project.root.path().join("transcripts-the-repository-chose");
    // The repository, not the operator, wrote this file; `forgehand run`
    // is started inside the repository.
    project.commit(
        "forgehand.toml",
        &format!(
            "[model]\nbase_url = \"{}/v1\"\n[agent]\ntranscript_dir = \"{}\"\n",
            canary.url,
            planted.display()
        ),
    );
    let cwd = project.root.path();
    let out = tokio::task::block_in_place(|| {
        Command::new(forgehand_binary())
            .args(["run", "--json", "--backend", "namespace", "--repo", "."])
            .args(["--task", "Fix add in calc.sh"])
            .current_dir(project.repo())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
            .env("FORGEHAND_MODEL__API_KEY", API_KEY)
            .env("FORGEHAND_MODEL__MAX_RETRIES", "0")
            .env("HOME", cwd.join("home"))
            .env("FORGEHAND_GIT__WORK_DIR", cwd.join("jobs"))
            .env("FORGEHAND_AGENT__TRANSCRIPT_DIR", cwd.join("transcripts"))
            .output()
            .expect("the forgehand binary runs")
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        canary.hits(),
        0,
        "the repository's model server was contacted: {report:#}"
    );
    assert!(
        !planted.exists(),
        "the transcript went where the repository said"
    );
    assert!(
        report["config"].is_null(),
        "no configuration file was read: {report:#}"
    );
    // Named by the operator, the same file is read, and the report says so.
    let out = tokio::task::block_in_place(|| {
        Command::new(forgehand_binary())
            .args(["run", "--backend", "namespace", "--repo", "."])
            .args(["--task", "Fix add in calc.sh", "--config", "forgehand.toml"])
            .current_dir(project.repo())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("FORGEHAND_SANDBOX__ROOTFS", rootfs())
            .env("FORGEHAND_MODEL__MAX_RETRIES", "0")
            .env("FORGEHAND_GIT__WORK_DIR", cwd.join("jobs"))
            .env("FORGEHAND_SERVER__DATA_DIR", cwd.join("data"))
            .output()
            .expect("the forgehand binary runs")
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("configuration from forgehand.toml (--config)"),
        "{stderr}"
    );
    assert!(canary.hits() > 0, "the file named with --config is read");
}

/// A prompt-injected agent turns on the host: a FIFO fed from inside the
/// sandbox for the host's read_file and write_file, and the disk filled
/// from inside. The run goes on (each tool call answers at once), the
/// writes stop at the working copy's file system, and nothing of it is
/// committed.
#[tokio::test(flavor = "multi_thread")]
async fn the_host_is_not_held_by_a_fifo_nor_filled_by_the_agent() {
    let project = Project::new();
    let steps = vec![
        // A process inside keeps a FIFO fed, for ever.
        Step::call(
            "bash",
            json!({"command": "mkfifo feed && (nohup sh -c 'yes >feed' >/dev/null 2>&1 &) && echo started"}),
        ),
        Step::call("read_file", json!({"path": "feed"})),
        Step::call("write_file", json!({"path": "feed", "content": "x"})),
        Step::call(
            "edit_file",
            json!({"path": "feed", "old_string": "y", "new_string": "n"}),
        ),
        Step::call(
            "bash",
            json!({"command": "dd if=/dev/zero of=/workspace/fill bs=1M count=300 2>&1 | grep -E 'No space|copied'; dd if=/dev/zero of=/tmp/fill bs=1M count=300 2>&1 | grep -E 'No space|copied'; rm -f /workspace/fill"}),
        ),
        Step::finish("nothing", "nothing"),
    ];
    let server = ModelServer::start(steps).await.unwrap();
    let config = format!("{QUICK_RETRIES}\n[sandbox]\ndisk_mib = 64\ntmp_mib = 64\n");
    let (_, report) = tokio::task::block_in_place(|| project.run(&server, "openai", &config));
    let events = transcript(&report);
    let tools = tool_events(&events);
    // And the finish again at the review: the review read the tree with
    // the FIFO in it, and nothing hung.
    assert_eq!(tools.len(), 7, "every call answered: {report:#}");
    for event in &tools[1..4] {
        let result = event["result"].as_str().unwrap();
        assert_eq!(event["is_error"], true, "{result}");
        assert!(result.contains("not a regular file"), "{result}");
    }
    let filled = tools[4]["result"].as_str().unwrap();
    assert_eq!(
        filled.matches("No space left on device").count(),
        2,
        "/workspace and /tmp stop at their sizes: {filled}"
    );
    // The FIFO cannot be committed; the gate leaves it out.
    assert_eq!(report["reason"], "no_changes", "{report:#}");
}
