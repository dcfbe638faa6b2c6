//! Sandbox latency, for bench/sandbox.sh: create-to-first-exec and one
//! `exec` of `true` in a live sandbox, with the limits applied.
//!
//!     cargo run --release -p forgehand-sandbox --example sandbox_latency -- ROOTFS [RUNS]
//!
//! Prints one line per measurement: `<name> p50_ms=… p99_ms=… runs=…`.

use std::time::{Duration, Instant};

use forgehand_sandbox::namespace::{sandbox_env, NamespaceBackend};
use forgehand_sandbox::{Backend, ExecRequest, Limits, SandboxSpec};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name} p50_ms={:.2} p99_ms={:.2} runs={}",
        percentile(&samples, 0.50),
        percentile(&samples, 0.99),
        samples.len()
    );
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rootfs = args.next().expect("usage: sandbox_latency ROOTFS [RUNS]");
    let runs: usize = args
        .next()
        .map_or(100, |r| r.parse().expect("RUNS is a number"));
    let workspace = tempfile::tempdir().unwrap();
    let backend = NamespaceBackend::default();
    let readiness = backend.readiness().await;
    assert!(
        readiness.is_usable(),
        "namespace backend: {}",
        readiness.detail()
    );
    let spec = SandboxSpec {
        rootfs: rootfs.into(),
        workspace: workspace.path().to_owned(),
        home: None,
        handover: Default::default(),
        env: sandbox_env([]),
        limits: Limits {
            memory_mib: 512,
            vcpus: 1,
            max_pids: 256,
            timeout: Duration::from_secs(60),
            output_limit_bytes: 1 << 20,
            tmp_mib: 256,
        },
    };

    // Warm-up: the first start pays for page-cache misses of the rootfs.
    for _ in 0..5 {
        let sandbox = backend.create(spec.clone()).await.unwrap();
        sandbox.exec(ExecRequest::new(["true"])).await.unwrap();
        sandbox.destroy().await.unwrap();
    }

    let mut create = Vec::with_capacity(runs);
    let mut create_only = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let sandbox = backend.create(spec.clone()).await.unwrap();
        create_only.push(started.elapsed());
        let out = sandbox.exec(ExecRequest::new(["true"])).await.unwrap();
        create.push(started.elapsed());
        assert!(out.status.success());
        sandbox.destroy().await.unwrap();
    }
    report("namespace create_to_first_exec", create);
    report("namespace create_only", create_only);

    let sandbox = backend.create(spec.clone()).await.unwrap();
    let mut exec = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let out = sandbox.exec(ExecRequest::new(["true"])).await.unwrap();
        exec.push(started.elapsed());
        assert!(out.status.success());
    }
    sandbox.destroy().await.unwrap();
    report("namespace exec_true", exec);
}
