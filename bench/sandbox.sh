#!/usr/bin/env bash
# Sandbox latency: Forgehand's namespace backend (limits applied) beside
# podman with runc on the same guest rootfs, in one run.
#
#   bash bench/sandbox.sh            # RUNS=100 per measurement (at least 50)
#
# Measures, p50 and p99 over RUNS:
#   - create-to-first-exec: a new sandbox, then `true` in it
#       forgehand: NamespaceBackend::create + exec (sandbox/examples/sandbox_latency.rs)
#       podman:    podman --runtime runc run --rm --network none --rootfs ROOTFS true
#   - exec round trip: `true` in a live sandbox
#       forgehand: exec in the sandbox created once
#       podman:    podman exec in a container started once
# The microvm backend is measured where a microVM boots (not on these
# machines: see shared/notes/sandbox.md); it is reported as not run.
# Targets for the namespace backend (with its host user, /proc masks,
# seccomp filter and Landlock): create-to-first-exec at least 10x faster
# than podman's, p50; exec < 5 ms p50. Reported, not enforced.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
. "$repo/scripts/lib.sh"
cd "$repo"

RUNS=${RUNS:-100}
[[ $RUNS =~ ^[0-9]+$ ]] && ((RUNS >= 50)) || { echo "RUNS must be a number >= 50" >&2; exit 2; }

sandbox_packages
apt_install podman runc python3
ensure_rust
rootfs="$(guest_rootfs)"

echo "==> cargo build --release --example sandbox_latency"
cargo build --release --locked -p forgehand-sandbox --example sandbox_latency
bin="${CARGO_TARGET_DIR:-$repo/target}/release/examples/sandbox_latency"

results="$(mktemp)"
container="forgehand-bench-$$"
cleanup() {
  podman --runtime runc rm -f "$container" >/dev/null 2>&1 || true
  rm -f "$results"
}
trap cleanup EXIT

echo "==> forgehand namespace backend ($RUNS runs each)"
"$bin" "$rootfs" "$RUNS" | tee -a "$results"

# podman needs raised limits on these machines (its defaults fail here);
# --read-only keeps it from writing into the shared rootfs directory.
podman_opts=(--runtime runc)
run_opts=(--network none --read-only --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 --rootfs "$rootfs")

echo "==> podman ($(podman --version), runc $(runc --version | head -1 | awk '{print $3}'))"
# Warm-up, and a check that podman works at all here.
podman "${podman_opts[@]}" run --rm "${run_opts[@]}" true
podman "${podman_opts[@]}" run -d --name "$container" "${run_opts[@]}" sleep infinity >/dev/null

python3 - "$RUNS" "$rootfs" "$container" <<'PY' | tee -a "$results"
import subprocess, sys, time
runs, rootfs, container = int(sys.argv[1]), sys.argv[2], sys.argv[3]
podman = ["podman", "--runtime", "runc"]
run_opts = ["--network", "none", "--read-only", "--ulimit", "nofile=20000:20000",
            "--ulimit", "nproc=4096:4096", "--rootfs", rootfs]

def measure(name, argv):
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - t)
    samples.sort()
    pick = lambda p: samples[round((len(samples) - 1) * p)] * 1000
    print(f"{name} p50_ms={pick(0.5):.2f} p99_ms={pick(0.99):.2f} runs={runs}")

measure("podman create_to_first_exec", podman + ["run", "--rm"] + run_opts + ["true"])
measure("podman exec_true", podman + ["exec", container, "true"])
PY

echo
echo "| measurement | namespace p50 | namespace p99 | podman+runc p50 | podman+runc p99 |"
echo "| --- | --- | --- | --- | --- |"
for m in create_to_first_exec exec_true; do
  ns=$(grep "^namespace $m " "$results")
  pm=$(grep "^podman $m " "$results")
  field() { sed -E "s/.*$1=([0-9.]+).*/\1/" <<<"$2"; }
  echo "| $m | $(field p50_ms "$ns") ms | $(field p99_ms "$ns") ms | $(field p50_ms "$pm") ms | $(field p99_ms "$pm") ms |"
done
echo "| microvm | not run: no microVM boots on this machine (paravirtual KVM) | | | |"
ns_create=$(grep "^namespace create_to_first_exec " "$results" | sed -E 's/.*p50_ms=([0-9.]+).*/\1/')
ns_exec=$(grep "^namespace exec_true " "$results" | sed -E 's/.*p50_ms=([0-9.]+).*/\1/')
pm_create=$(grep "^podman create_to_first_exec " "$results" | sed -E 's/.*p50_ms=([0-9.]+).*/\1/')
echo
awk -v c="$ns_create" -v e="$ns_exec" -v p="$pm_create" 'BEGIN {
  printf "namespace create-to-first-exec p50 %.2f ms: %.1fx faster than podman   target >= 10x: %s\n", c, p / c, (p / c >= 10 ? "yes" : "NO")
  printf "namespace exec round trip p50 %.2f ms                               target < 5 ms: %s\n", e, (e < 5 ? "yes" : "NO")
}'
