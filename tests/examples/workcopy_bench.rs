//! How fast a job's working copy is ready: from the mirror cache (an
//! incremental fetch of the mirror over smart HTTP, then the copy),
//! layered over a shared checkout of the base commit (what jobs do), and
//! a fresh clone over smart HTTP, for a generated repository. Measured
//! side by side, alternating, in one run; then the disk ten concurrent
//! jobs on the repository take, layered and as full copies. Driven by
//! bench/workcopy.sh; needs root (overlay mounts).
//!
//! Arguments: FILES COMMITS RUNS. Prints one JSON object.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use forgehand_forge::git::{transport, Checkouts, CopyStrategy, Credentials, MirrorCache};
use forgehand_sandbox::layers::Overlay;
use forgehand_tests::git_http::GitHttpServer;
use secrecy::SecretString;

const TOKEN: &str = "bench-token-0123456789";

fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let [files, commits, runs] = args[..] else {
        anyhow::bail!("usage: workcopy_bench FILES COMMITS RUNS");
    };
    let root = tempfile::tempdir()?;
    let generated = Instant::now();
    let served = root.path().join("srv");
    generate(&served.join("big.git"), files, commits)?;
    let pack_bytes = dir_size(&served.join("big.git/objects"))?;
    eprintln!(
        "generated {files} files, {commits} commits ({:.1} MB of objects) in {:.1}s",
        pack_bytes as f64 / 1e6,
        generated.elapsed().as_secs_f64()
    );

    let runtime = tokio::runtime::Runtime::new()?;
    let server = runtime.block_on(GitHttpServer::start(&served, "bot", TOKEN))?;
    let url = format!("{}/big.git", server.base_url);
    let credentials = Credentials::Token {
        username: "bot".into(),
        token: SecretString::from(TOKEN.to_owned()),
    };
    let cache = MirrorCache::new(root.path().join("cache"));
    let first = Instant::now();
    drop(cache.update("bench/acme/big", &url, &credentials)?);
    eprintln!(
        "first mirror clone: {:.0} ms",
        first.elapsed().as_secs_f64() * 1e3
    );

    let auth = format!(
        "Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("bot:{TOKEN}"))
    );
    // The shared checkout of the base commit: made by the first job on the
    // repository, reused by every later one (reported beside).
    let checkouts = Checkouts::new(root.path().join("checkouts"));
    let base = cache
        .update("bench/acme/big", &url, &credentials)?
        .branch_commit("main")?;
    let first_checkout = Instant::now();
    {
        let mirror = cache.update("bench/acme/big", &url, &credentials)?;
        drop(checkouts.ensure("bench/acme/big", &mirror.repo, base, &|_: &Path| Ok(()))?);
    }
    let first_checkout = first_checkout.elapsed();
    eprintln!(
        "first shared checkout: {:.0} ms",
        first_checkout.as_secs_f64() * 1e3
    );
    let mut samples: [Vec<Duration>; 6] = Default::default();
    for run in 0..runs {
        let dir = root.path().join(format!("run{run}"));
        std::fs::create_dir_all(&dir)?;
        // Fresh clone with the git command, as a person would.
        settle()?;
        let started = Instant::now();
        let status = Command::new("git")
            .args(["-c", &format!("http.extraHeader={auth}")])
            .args(["clone", "--quiet", &url])
            .arg(dir.join("cli"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &dir)
            .status()?;
        anyhow::ensure!(status.success(), "git clone failed");
        samples[0].push(started.elapsed());

        // Fresh clone with Forgehand's transport (git2), then checkout.
        settle()?;
        let started = Instant::now();
        let bare = transport::clone_bare(&dir.join("git2.git"), &url, &credentials)?;
        std::fs::create_dir(dir.join("git2"))?;
        bare.set_workdir(&dir.join("git2"), false)?;
        bare.set_head("refs/heads/main")?;
        bare.checkout_head(Some(git2::build::CheckoutBuilder::new().force()))?;
        samples[1].push(started.elapsed());

        for (slot, strategy) in [(2, CopyStrategy::HardLinks), (3, CopyStrategy::LocalFetch)] {
            settle()?;
            let started = Instant::now();
            let mirror = cache.update("bench/acme/big", &url, &credentials)?;
            let fetched = started.elapsed();
            let name = format!("{strategy:?}");
            let repo = mirror.working_copy_with(
                strategy,
                &dir.join(&name),
                &dir.join(format!("{name}.git")),
                "main",
                "forgehand/1-bench",
            )?;
            samples[slot].push(started.elapsed());
            if strategy == CopyStrategy::HardLinks {
                samples[4].push(fetched);
            }
            anyhow::ensure!(dir.join(&name).join("f/0/0.txt").exists());
            drop(repo);
        }
        // Layered over the shared checkout, as a job's is.
        settle()?;
        let started = Instant::now();
        let job = layered_job(&cache, &checkouts, &url, &credentials, &dir.join("layered"))?;
        samples[5].push(started.elapsed());
        anyhow::ensure!(job.0.path().join("f/0/0.txt").exists());
        drop(job);
        std::fs::remove_dir_all(&dir)?;
    }
    let disk = concurrent_disk(
        &root.path().join("ten"),
        &cache,
        &checkouts,
        &url,
        &credentials,
        &auth,
    )?;
    let report = |s: &mut Vec<Duration>| {
        s.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        serde_json::json!({
            "p50_ms": ms(s[s.len() / 2]),
            "min_ms": ms(s[0]),
            "max_ms": ms(s[s.len() - 1]),
        })
    };
    let [cli, git2, links, fetch, update, layered] = &mut samples;
    let median = |s: &Vec<Duration>| s[s.len() / 2].as_secs_f64();
    let out = serde_json::json!({
        "files": files,
        "commits": commits,
        "runs": runs,
        "object_bytes": pack_bytes,
        "fresh_git_clone": report(cli),
        "fresh_git2_clone": report(git2),
        "mirror_hardlinks": report(links),
        "mirror_local_fetch": report(fetch),
        "of_which_mirror_update": report(update),
        "layered": report(layered),
        "first_shared_checkout_ms": first_checkout.as_secs_f64() * 1e3,
        "ratio_git_clone_over_hardlinks": median(cli) / median(links),
        "ratio_git_clone_over_local_fetch": median(cli) / median(fetch),
        "ratio_git_clone_over_layered": median(cli) / median(layered),
        "disk_ten_layered_bytes": disk.0,
        "disk_ten_full_copies_bytes": disk.1,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    drop(server);
    Ok(())
}

/// A job's working copy as the pipeline makes it: the mirror updated, the
/// shared checkout of the base commit (made already), an overlay with the
/// job's own writable layer over it, and the job's git directory with
/// the mirror's objects linked and the checkout's index. Returned mounted.
fn layered_job(
    cache: &MirrorCache,
    checkouts: &Checkouts,
    url: &str,
    credentials: &Credentials,
    dir: &Path,
) -> anyhow::Result<(Overlay, forgehand_forge::git::Checkout)> {
    let mirror = cache.update("bench/acme/big", url, credentials)?;
    let commit = mirror.branch_commit("main")?;
    let checkout = checkouts.ensure("bench/acme/big", &mirror.repo, commit, &|_: &Path| Ok(()))?;
    for sub in ["upper", "work", "tree"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    let overlay = Overlay::writable(
        &[&checkout.tree],
        &dir.join("upper"),
        &dir.join("work"),
        &dir.join("tree"),
    )?;
    let repo = mirror.layered_copy(
        commit,
        &checkout.index,
        overlay.path(),
        &dir.join("tree.git"),
        "forgehand/1-bench",
    )?;
    // What the gate asks of git later: nothing changed, nothing read.
    anyhow::ensure!(
        repo.statuses(None)?.is_empty(),
        "the layered copy is not clean"
    );
    Ok((overlay, checkout))
}

/// The disk ten concurrent jobs take: layered (their git directories and
/// writable layers, and the one shared checkout), and as ten full `git
/// clone`s. Blocks on disk, so hard links and sparse files count once.
fn concurrent_disk(
    dir: &Path,
    cache: &MirrorCache,
    checkouts: &Checkouts,
    url: &str,
    credentials: &Credentials,
    auth: &str,
) -> anyhow::Result<(u64, u64)> {
    let mut jobs = Vec::new();
    for n in 0..10 {
        jobs.push(layered_job(
            cache,
            checkouts,
            url,
            credentials,
            &dir.join(format!("job{n}")),
        )?);
    }
    let checkout_dir = jobs[0].1.tree.parent().unwrap().to_owned();
    let layered = du(dir)? + du(&checkout_dir)?;
    drop(jobs);
    for n in 0..10 {
        let status = Command::new("git")
            .args(["-c", &format!("http.extraHeader={auth}")])
            .args(["clone", "--quiet", url])
            .arg(dir.join(format!("full{n}")))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .status()?;
        anyhow::ensure!(status.success(), "git clone failed");
    }
    let full: u64 = (0..10)
        .map(|n| du(&dir.join(format!("full{n}"))))
        .sum::<std::io::Result<u64>>()?;
    std::fs::remove_dir_all(dir)?;
    Ok((layered, full))
}

/// Blocks a tree takes (each inode once: hard links count once), on its
/// own file system: a job's merged view (an overlay mounted in it) is
/// not counted again, its writable layer is.
fn du(path: &Path) -> std::io::Result<u64> {
    let out = Command::new("du")
        .args(["-s", "-x", "--block-size=1"])
        .arg(path)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("du {}: {text}", path.display())))
}

/// Writes back what the last measurement left dirty, so that it is not
/// charged to the next one.
fn settle() -> anyhow::Result<()> {
    anyhow::ensure!(Command::new("sync").status()?.success(), "sync failed");
    Ok(())
}

/// A bare repository at `path` with `files` files in the first commit
/// and `commits - 1` more that each change ten of them, written with
/// `git fast-import` (seconds, not minutes).
fn generate(path: &Path, files: usize, commits: usize) -> anyhow::Result<()> {
    let ok = Command::new("git")
        .args(["init", "--quiet", "--bare", "--initial-branch=main"])
        .arg(path)
        .status()?
        .success();
    anyhow::ensure!(ok, "git init failed");
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(path)
        .stdin(Stdio::piped())
        .spawn()?;
    let mut input = std::io::BufWriter::new(child.stdin.take().expect("piped"));
    let file = |i: usize| format!("f/{}/{}.txt", i % 100, i / 100);
    for commit in 0..commits {
        writeln!(input, "commit refs/heads/main")?;
        writeln!(
            input,
            "committer Bench <bench@example.invalid> {} +0000",
            1_700_000_000 + commit
        )?;
        let message = format!("commit {commit}");
        writeln!(input, "data {}\n{message}", message.len())?;
        let touched: Vec<usize> = if commit == 0 {
            (0..files).collect()
        } else {
            (0..10)
                .map(|k| (commit * 7919 + k * 104_729) % files)
                .collect()
        };
        for i in touched {
            let body = format!(
                "file {i}, revision {commit}\n{}\n",
                "line of ordinary source text\n".repeat(20)
            );
            writeln!(input, "M 644 inline {}\ndata {}", file(i), body.len())?;
            input.write_all(body.as_bytes())?;
            writeln!(input)?;
        }
    }
    drop(input);
    anyhow::ensure!(child.wait()?.success(), "git fast-import failed");
    // Served as a forge serves: packed.
    let ok = Command::new("git")
        .args(["repack", "-a", "-d", "-q"])
        .current_dir(path)
        .status()?
        .success();
    anyhow::ensure!(ok, "git repack failed");
    Ok(())
}

fn dir_size(path: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}
