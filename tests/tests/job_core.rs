//! One job core: `forgehand run` and the pipeline say the same reason for
//! the same tree. Before the core, `run` assembled its own working copy
//! and reported a tree with more watched entries than the integrity
//! snapshot records as `infra`, where the pipeline said `too_large`.

use std::path::Path;

use forgehand_tests::fake_forge::Kind;
use forgehand_tests::local_run::{repository, LocalRuns};
use forgehand_tests::model_server::ModelServer;
use forgehand_tests::project::good_script;
use forgehand_tests::story::{only, Story};

/// One more symlink than the snapshot records (`TreeLimits::max_recorded`,
/// 50,000, at its default: the checkout writes them all, the snapshot
/// refuses the tree).
const LINKS: usize = 50_001;

/// A commit on `branch` of the bare repository at `git_dir` adding
/// `links/<n>` symlinks to `../README.md`.
fn commit_links(git_dir: &Path, branch: &str) {
    let repo = git2::Repository::open(git_dir).unwrap();
    let reference = format!("refs/heads/{branch}");
    let parent = repo
        .find_reference(&reference)
        .unwrap()
        .peel_to_commit()
        .unwrap();
    let target = repo.blob(b"../README.md").unwrap();
    let mut links = repo.treebuilder(None).unwrap();
    for n in 0..LINKS {
        links
            .insert(format!("l{n}"), target, git2::FileMode::Link.into())
            .unwrap();
    }
    let links = links.write().unwrap();
    let mut root = repo.treebuilder(Some(&parent.tree().unwrap())).unwrap();
    root.insert("links", links, git2::FileMode::Tree.into())
        .unwrap();
    let tree = repo.find_tree(root.write().unwrap()).unwrap();
    let sig = git2::Signature::now("Maintainer", "m@example.invalid").unwrap();
    repo.commit(Some(&reference), &sig, &sig, "links", &tree, &[&parent])
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn run_and_the_pipeline_give_one_reason_for_a_tree_the_snapshot_will_not_record() {
    // The pipeline, on a forge job.
    let story = Story::start(Kind::GitHub, good_script()).await;
    commit_links(&story.dir().join("served/demo.git"), "main");
    story.label(1).await;
    let jobs = story.settled().await;
    let job = only(&jobs, "labeled");
    assert_eq!(job["state"], "failed", "{job:#}");
    let pipeline = job["result"]["reason"].as_str().unwrap().to_owned();
    let status = story.status(1);
    assert!(
        status.contains("more than 50000 watched files and symlinks"),
        "{status}"
    );

    // `forgehand run`, on the same tree.
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    repository(&repo, &[("README.md", "# demo\n".to_owned())]);
    commit_links(&repo.join(".git"), "main");
    let git = git2::Repository::open(&repo).unwrap();
    git.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))
        .unwrap();
    let runs = LocalRuns {
        dir: dir.path().join("runs"),
    };
    std::fs::create_dir_all(&runs.dir).unwrap();
    let server = ModelServer::start(good_script()).await.unwrap();
    let report = tokio::task::block_in_place(|| runs.run(&repo, &server, "", "Fix add"));
    assert_eq!(report["status"], "failed", "{report:#}");
    assert_eq!(report["reason"], pipeline.as_str(), "{report:#}");
    assert_eq!(pipeline, "too_large");
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("more than 50000 watched files and symlinks"),
        "{report:#}"
    );
}
